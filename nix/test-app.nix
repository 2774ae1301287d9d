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
  core, # e.g. "cortex-m7"
  fvp ? null, # the Corstone-300 FVP package: the app runs on it, with a runner for its board
}:
let
  # The pinned runners, so that neither is built at run time: for the core's QEMU board, and for
  # the Corstone-300 board only when the app is given the FVP (else `nix run` would build a
  # runner for a model that is not there; one found at run time gets its runner built then).
  runners = [
    (kernels core).runner
  ]
  ++ lib.optional (fvp != null) ((kernels core).override { board = "corstone-300"; }).runner;
in
writeShellApplication {
  name = "cortexm-test-${lib.removePrefix "cortex-" core}${lib.optionalString (fvp != null) "-fvp"}";
  runtimeInputs = [ cortexm ];
  runtimeEnv.CORTEXM_RUNNERS = lib.concatMapStringsSep ":" toString runners;
  text =
    lib.optionalString (fvp != null) ''
      export CORTEXM_FVP="''${CORTEXM_FVP:-${lib.getExe fvp}}"
    ''
    + ''
      sim=qemu
      if [ -n "''${CORTEXM_FVP:-}" ] || command -v ${pins.fvp.corstone-300.binary} >/dev/null; then
        sim=fvp
      fi
      exec cortexm test --target ${core} --sim "$sim" "$@"
    '';
}
