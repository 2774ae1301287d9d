# The firmware for one core, built by cortexm's own build driver (`cortexm build`, over
# kernels/CMakeLists.txt) from the pinned trees: ExecuTorch's runtime, the portable kernels
# the built-in suite needs, every cortex_m kernel and CMSIS-NN for the core.
#   out     lib/*.a: the kernel libraries (libkernel_registration.a registers them from static
#           constructors: link it whole), include/: the headers the build generated
#   runner  executor_runner.elf, its linker map, and cortexm's build.json (core, board, ops)
{
  lib,
  stdenvNoCC,
  cmake,
  ninja,
  python,
  toolEnv,
  core, # e.g. "cortex-m7"
  board ? null, # board support folder under fvp/boards; null: the core's QEMU board
}:
let
  # What `cortexm build` imports, and the codegen it runs (torchgen, yaml).
  buildPython = python.withPackages (
    ps:
    [
      ps.click
      ps.pyyaml
      ps.torch
    ]
    ++ lib.optional (ps.flatc != null) ps.flatc
  );
in
stdenvNoCC.mkDerivation {
  pname = "cortexm-kernels-${lib.removePrefix "cortex-" core}";
  version = (lib.importTOML ../pyproject.toml).project.version;

  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../pins.toml
      ../cortexm
      ./.
      ../fvp
    ];
  };

  outputs = [
    "out"
    "runner"
  ];
  nativeBuildInputs = [
    cmake
    ninja
    buildPython
  ];
  env = toolEnv;
  dontUseCmakeConfigure = true;

  buildPhase = ''
    runHook preBuild
    export XDG_CACHE_HOME=$TMPDIR/cache CORTEXM_BUILD_JOBS=$NIX_BUILD_CORES
    python -m cortexm build --target ${core} ${
      lib.optionalString (board != null) "--board ${board}"
    } --json > build.out.json
    runHook postBuild
  '';

  installPhase = ''
    runHook preInstall
    elf=$(python -c 'import json; print(json.load(open("build.out.json"))["elf"])')
    mkdir -p $runner $out/lib $out/include
    cp "$(dirname "$elf")"/* $runner/
    work=$(dirname "$(find $XDG_CACHE_HOME -name CMakeCache.txt | head -n 1)")
    find "$work" -name '*.a' -exec cp {} $out/lib/ \;
    find "$work/CMakeFiles/kernel_registration.dir" -name '*.obj' -print0 \
      | xargs -0 ''${CORTEXM_TOOLCHAIN_PREFIX}ar rcs $out/lib/libkernel_registration.a
    cp -r "$work"/schema/include/. $out/include/
    if [ -d "$work/kernel_num" ]; then cp -r "$work"/kernel_num/. $out/include/; fi
    runHook postInstall
  '';

  # Cross-compiled Arm code: nothing for the host's strip and patchelf.
  dontStrip = true;
  dontPatchELF = true;

  meta = {
    description = "ExecuTorch runtime, cortex_m kernels and CMSIS-NN cross-compiled for the ${core}, and its test runner";
    license = with lib.licenses; [
      bsd3
      asl20
    ];
  };
}
