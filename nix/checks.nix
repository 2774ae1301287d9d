# `nix flake check`: everything here runs offline in the sandbox. The pin file agrees with the
# locked inputs; the runner builds for every core; the Python tests; the dialect goldens; and
# the built-in suite on QEMU with the pinned runners of the M7 and the M55.
{
  lib,
  runCommand,
  pins,
  inputs,
  cores,
  kernels,
  cortexm,
  python,
  qemu,
  cmake,
  ninja,
  toolEnv,
}:
let
  # The tests and the flake files they read, added to the package's own sources in the
  # checks' writable checkout.
  testFiles = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../tests
      ../flake.nix
      ../flake.lock
      ../nix
      ../cmsis_nn
    ];
  };

  # What flake.lock locked against what pins.toml pins, one line per disagreement.
  lockProblems =
    let
      compare =
        name: pin:
        let
          input = inputs.${name};
          narHash = input.narHash or null;
        in
        if !(input ? rev) then
          [ "${name}: the input has no rev (overridden with a path?); pins.toml pins ${pin.rev}" ]
        else
          lib.optional (input.rev != pin.rev) "${name}: locked at ${input.rev}, pins.toml pins ${pin.rev}"
          ++ lib.optional (
            narHash != null && pin.nar_hash != "" && narHash != pin.nar_hash
          ) "${name}: locked narHash ${narHash}, pins.toml has ${pin.nar_hash}"
          ++ lib.optional (
            narHash != null && pin.nar_hash == ""
          ) "${name}: flake.lock has narHash ${narHash}; record it as nar_hash in pins.toml";
    in
    lib.concatLists (
      lib.mapAttrsToList compare (
        {
          inherit (pins) executorch cmsis-nn;
        }
        // lib.optionalAttrs (pins ? nixpkgs) { inherit (pins) nixpkgs; }
      )
    );

  # A script run in that checkout, with cortexm and QEMU.
  inSource =
    name: env: script:
    runCommand "cortexm-${name}"
      (
        {
          nativeBuildInputs = [
            cortexm
            qemu
          ];
        }
        // env
      )
      ''
        cp -r ${python.pkgs.cortexm.src} source && chmod -R u+w source
        cp -r ${testFiles}/. source/ && chmod -R u+w source && cd source
        export HOME=$TMPDIR XDG_CACHE_HOME=$TMPDIR/cache
        mkdir -p $out
        ${script}
      '';

  qemuSuite =
    core:
    inSource "qemu-${core}" { CORTEXM_RUNNERS = "${(kernels "cortex-${core}").runner}"; } ''
      cortexm test --target cortex-${core} --sim qemu --junit $out/junit.xml --json $out/report.json
    '';
in
{
  pins =
    runCommand "cortexm-pins" { problems = lib.concatStringsSep "\n" lockProblems; }
      ''
        if [ -n "$problems" ]; then
          echo "pins.toml and flake.lock disagree:" >&2
          echo "$problems" >&2
          exit 1
        fi
        touch $out
      '';

  pytest =
    inSource "pytest"
      {
        nativeBuildInputs = [
          (python.withPackages (ps: [ ps.cortexm ] ++ ps.cortexm.optional-dependencies.test))
          qemu
          cmake
          ninja
        ];
        env = toolEnv;
      }
      ''
        python -m pytest -p no:cacheprovider --junitxml=$out/junit.xml
      '';

  goldens = inSource "goldens" { } ''
    cortexm dialect --all -t cortex-m7 -t cortex-m55 --goldens tests/goldens
  '';

  qemu-m7 = qemuSuite "m7";
  qemu-m55 = qemuSuite "m55";
}
// lib.listToAttrs (
  map (core: lib.nameValuePair "runner-${core}" (kernels "cortex-${core}").runner) cores
)
