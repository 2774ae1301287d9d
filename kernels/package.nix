# The firmware for one core, built by cortexm's own build driver (`cortexm build`, over
# kernels/CMakeLists.txt) from the pinned trees: ExecuTorch's runtime, the portable kernels
# the built-in suite needs, every cortex_m kernel and CMSIS-NN for the core.
#   out     lib/*.a: the kernel libraries (libkernel_registration.a registers them from static
#           constructors: link it whole), include/: the headers the build generated
#   runner  executor_runner.elf, its linker map, and cortexm's build.json (core, board, ops)
# Neither output refers to the source trees (disallowedReferences): a runner's closure does not
# hold them.
{
  lib,
  stdenvNoCC,
  cmake,
  ninja,
  removeReferencesTo,
  python,
  firmwareEnv,
  executorch-src,
  cmsis-nn-src,
  gcc-arm-embedded,
  core, # e.g. "cortex-m7"
  board ? null, # board support folder under fvp/boards; null: the core's QEMU board
}:
let
  # The codegen the build runs (torchgen, yaml), and flatc; the build driver needs only the stdlib.
  buildPython = python.withPackages (
    ps:
    [
      ps.pyyaml
      ps.torch
    ]
    ++ lib.optional (ps.flatc != null) ps.flatc
  );
  # Beside the firmware but no build input (the build driver's key leaves them out too:
  # NOT_BUILD_INPUTS in cortexm/sources/identity.py): a README edit rebuilds no runner. Nor does
  # an edit of what reads a built runner (its coverage counters, its ELF's sizes), nor of the
  # lowering's host module project (cmsis_nn_helper, cmsis_nn/helper.nix builds it).
  notBuildInputs = lib.fileset.union (lib.fileset.fileFilter (file: file.hasExt "md" || file.hasExt "nix") ../.) (
    lib.fileset.union (lib.fileset.union ../cortexm/firmware/coverage ../cortexm/firmware/size.py) ./cmsis_nn_helper
  );
in
stdenvNoCC.mkDerivation {
  pname = "cortexm-kernels-${lib.removePrefix "cortex-" core}";
  version = (lib.importTOML ../pyproject.toml).project.version;

  # Only what a runner build reads: the build driver (cortexm.firmware.build and what it imports;
  # tests/project/test_nix.py checks the list against the import graph), the CMake project and the boards.
  # An edit elsewhere in cortexm/ (a report, the CLI) rebuilds no runner.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.difference (lib.fileset.unions [
      ../pins.toml
      ../cortexm/__init__.py
      ../cortexm/base
      ../cortexm/firmware
      ../cortexm/pte
      ../cortexm/sources
      ./.
      ../fvp/boards
    ]) notBuildInputs;
  };

  outputs = [
    "out"
    "runner"
  ];
  nativeBuildInputs = [
    cmake
    ninja
    buildPython
    removeReferencesTo
  ];
  env = firmwareEnv;
  dontUseCmakeConfigure = true;

  buildPhase = ''
    runHook preBuild
    export XDG_CACHE_HOME=$TMPDIR/cache CORTEXM_BUILD_JOBS=$NIX_BUILD_CORES
    # The build driver itself, not the CLI: the CLI imports every stage.
    python - <<'EOF'
    import json
    from cortexm.firmware import build_runner
    runner = build_runner("${core}", board=${if board == null then "None" else ''"${board}"''})
    json.dump({"elf": str(runner.elf)}, open("build.out.json", "w"))
    EOF
    runHook postBuild
  '';

  installPhase = ''
    runHook preInstall
    elf=$(python -c 'import json; print(json.load(open("build.out.json"))["elf"])')
    mkdir -p $runner $out/lib $out/include
    cp "$(dirname "$elf")"/{executor_runner.elf,executor_runner.map,build.json} $runner/
    # The map names the trees' and the toolchain's store paths (CMake's object names, libc.a),
    # and build.json where the trees were: Nix would keep all three alive with the runner.
    # build.json's inputs name the trees by content; without paths, cortexm looks a tree's files
    # up in the trees it is given. The map's entry in build.json's manifest follows the edit.
    remove-references-to -t ${executorch-src} -t ${cmsis-nn-src} -t ${gcc-arm-embedded} \
      $runner/executor_runner.map
    python - <<'EOF'
    import json, os
    from pathlib import Path
    from cortexm.base import manifest
    runner = Path(os.environ["runner"])
    record = json.loads((runner / "build.json").read_text())
    record.pop("trees", None)
    record[manifest.KEY] = manifest.of_files(runner, sorted(record[manifest.KEY]))
    (runner / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    EOF
    work=$(dirname "$(find $XDG_CACHE_HOME -name CMakeCache.txt | head -n 1)")
    find "$work" -name '*.a' -exec cp {} $out/lib/ \;
    # Sorted members and D (no timestamps): the same bytes on every build.
    find "$work/CMakeFiles/kernel_registration.dir" -name '*.obj' -print0 | sort -z \
      | xargs -0 ''${CORTEXM_TOOLCHAIN_PREFIX}ar rcsD $out/lib/libkernel_registration.a
    cp -r "$work"/schema/include/. $out/include/
    if [ -d "$work/kernel_num" ]; then cp -r "$work"/kernel_num/. $out/include/; fi
    runHook postInstall
  '';

  # Cross-compiled Arm code: nothing for the host's strip and patchelf.
  dontStrip = true;
  dontPatchELF = true;
  # A reference that comes back fails the build instead of growing every runner's closure.
  disallowedReferences = [
    "${executorch-src}"
    "${cmsis-nn-src}"
  ];

  meta = {
    description = "ExecuTorch runtime, cortex_m kernels and CMSIS-NN cross-compiled for the ${core}, and its test runner";
    license = with lib.licenses; [
      bsd3
      asl20
    ];
  };
}
