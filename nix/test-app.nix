# `cortexm test` for one core against the pinned runners (the flake's runner packages, handed to
# cortexm as $CORTEXM_RUNNERS): on QEMU, or on the Corstone FVP when one is on PATH or
# $CORTEXM_FVP names it (the FVP is unfree: fvp/package.nix says how to add it). Arguments are
# passed on, so `-- --sim qemu`, `-k conv` or `--junit report.xml` work as with cortexm itself.
{
  lib,
  writeShellApplication,
  cortexm,
  kernels,
  pins,
  fvp-corstone-300, # null where Arm publishes no FVP
  core, # e.g. "cortex-m7"
}:
let
  # The pinned runners: for the core's QEMU board, and, where an FVP exists, for the Corstone-300
  # board the FVP runs, so that neither is built at run time.
  runners = [
    (kernels core).runner
  ]
  ++ lib.optional (fvp-corstone-300 != null) ((kernels core).override { board = "corstone-300"; }).runner;
in
writeShellApplication {
  name = "cortexm-test-${lib.removePrefix "cortex-" core}";
  runtimeInputs = [ cortexm ];
  runtimeEnv.CORTEXM_RUNNERS = lib.concatMapStringsSep ":" toString runners;
  text = ''
    sim=qemu
    if [ -n "''${CORTEXM_FVP:-}" ] || command -v ${pins.fvp.corstone-300.binary} >/dev/null; then
      sim=fvp
    fi
    exec cortexm test --target ${core} --sim "$sim" "$@"
  '';
}
