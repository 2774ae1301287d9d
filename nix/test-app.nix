# `cortexm test` for one core against the pinned runner (the flake's runner package, handed to
# cortexm as $CORTEXM_RUNNERS): on QEMU, or on the Corstone FVP when one is on PATH or
# $CORTEXM_FVP names it (the FVP is unfree: fvp/package.nix says how to add it). Arguments are
# passed on, so `-- --sim qemu`, `-k conv` or `--junit report.xml` work as with cortexm itself.
{
  lib,
  writeShellApplication,
  cortexm,
  kernels,
  pins,
  core, # e.g. "cortex-m7"
}:
writeShellApplication {
  name = "cortexm-test-${lib.removePrefix "cortex-" core}";
  runtimeInputs = [ cortexm ];
  runtimeEnv.CORTEXM_RUNNERS = "${(kernels core).runner}";
  text = ''
    sim=qemu
    if [ -n "''${CORTEXM_FVP:-}" ] || command -v ${pins.fvp.corstone-300.binary} >/dev/null; then
      sim=fvp
    fi
    exec cortexm test --target ${core} --sim "$sim" "$@"
  '';
}
