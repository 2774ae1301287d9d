# Arm's Corstone-300 Fixed Virtual Platform (Cortex-M55 + Ethos-U55): unfree, under Arm's EULA.
# Nix does not download it. You download it from Arm and add it to the store yourself, and that
# step is your acceptance of the EULA it contains, which the build then passes to Arm's
# installer (--i-agree-to-the-contained-eula). The archive is checked against the sha256
# pins.toml gives (published in meta-arm's recipe; its provenance is there).
{
  lib,
  stdenv,
  requireFile,
  autoPatchelfHook,
  pins,
}:
let
  fvp = pins.fvp.corstone-300;
  inherit (stdenv.hostPlatform) system;
  file =
    fvp.files.${system}
      or (throw "pins.toml has no Corstone-300 FVP for ${system} ([fvp.corstone-300.files.${system}])");
  name = baseNameOf file.url;
in
stdenv.mkDerivation {
  pname = "fvp-corstone-300";
  inherit (fvp) version;

  src = requireFile {
    inherit name;
    hash = import ../nix/sri.nix file.sha256;
    message = ''
      The Corstone-300 FVP is under Arm's EULA; Nix cannot download it for you.
        1. Download ${file.url}
           (the EULA is in the archive: license_terms/license_agreement.txt).
        2. If you accept it, add the archive to the Nix store:
             nix-store --add-fixed sha256 ${name}
      Adding the archive is your acceptance: the build runs Arm's installer with
      --i-agree-to-the-contained-eula.
    '';
  };
  sourceRoot = ".";

  nativeBuildInputs = [ autoPatchelfHook ];
  buildInputs = [ (lib.getLib stdenv.cc.cc) ];
  # The GUI and optional plugins link libraries a headless run never loads; the archive was
  # not available where this file was written to list them by name, so unresolved ones are
  # allowed here, and the install check below proves the model starts headless with what it has.
  autoPatchelfIgnoreMissingDeps = true;

  dontConfigure = true;
  dontBuild = true;
  installPhase = ''
    runHook preInstall
    sh ./FVP_Corstone_SSE-300.sh --i-agree-to-the-contained-eula --no-interactive --force \
      --destination $out/opt/corstone-300 -q
    mkdir -p $out/bin
    ln -s $out/opt/corstone-300/models/${file.model_dir}/${fvp.binary} $out/bin/${fvp.binary}
    runHook postInstall
  '';
  dontStrip = true;

  # What a headless run needs is there: the model loads its libraries and plugins and lists its
  # parameters without a display (a library autoPatchelf could not resolve fails it here).
  doInstallCheck = true;
  installCheckPhase = ''
    runHook preInstallCheck
    env -u DISPLAY $out/bin/${fvp.binary} --list-params > params.txt
    grep -q cpu0 params.txt
    runHook postInstallCheck
  '';

  meta = {
    description = "Arm Corstone-300 Fixed Virtual Platform (Cortex-M55 with Ethos-U55)";
    homepage = "https://developer.arm.com/Tools%20and%20Software/Fixed%20Virtual%20Platforms";
    license = lib.licenses.unfree;
    sourceProvenance = [ lib.sourceTypes.binaryNativeCode ];
    platforms = builtins.attrNames fvp.files;
    mainProgram = fvp.binary;
  };
}
