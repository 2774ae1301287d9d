# `nix develop`: the toolchain, CMake and Ninja, QEMU, Python with every dependency of cortexm
# and its tests, and the variables that point cortexm at the pinned trees. Inside a checkout
# the working copy is what runs (PYTHONPATH, and the pin file, goldens and firmware beside it).
# `fvp` adds the Corstone-300 FVP (unfree: fvp/package.nix says how to add it).
{
  lib,
  mkShell,
  cmake,
  ninja,
  qemu,
  python,
  gcc-arm-embedded,
  toolEnv,
  fvp ? null,
}:
mkShell {
  packages = [
    (python.withPackages (ps: [ ps.cortexm ] ++ ps.cortexm.optional-dependencies.test))
    gcc-arm-embedded
    cmake
    ninja
    qemu
  ]
  ++ lib.optional (fvp != null) fvp;

  env = toolEnv // lib.optionalAttrs (fvp != null) { CORTEXM_FVP = lib.getExe fvp; };

  shellHook = ''
    if [ -f pyproject.toml ] && [ -d cortexm ] && [ -f pins.toml ]; then
      export PYTHONPATH="$PWD''${PYTHONPATH:+:$PYTHONPATH}"
      export CORTEXM_PINS="$PWD/pins.toml" CORTEXM_GOLDENS="$PWD/tests/goldens" CORTEXM_FIRMWARE_SRC="$PWD"
    fi
  '';
}
