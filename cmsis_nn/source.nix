# The CMSIS-NN tree runner builds compile: the cmsis-nn input, which must be the revision the
# ExecuTorch tree pins (CMSIS_NN_VERSION in backends/cortex_m/CMakeLists.txt). An ExecuTorch
# checkout that moved to another CMSIS-NN stops the evaluation with the flag that fixes it.
{
  lib,
  executorch-src,
  src,
}:
let
  cmake = builtins.readFile "${executorch-src}/backends/cortex_m/CMakeLists.txt";
  found = lib.filter lib.isList (
    builtins.split ''set\([[:space:]]*CMSIS_NN_VERSION[[:space:]]+"?([0-9a-fA-F]+)"?'' cmake
  );
  wanted = if found == [ ] then null else lib.head (lib.head found);
  # A path: override has no rev; its content is the user's choice.
  have = src.rev or null;
in
if wanted == null || have == null || lib.hasPrefix wanted have then
  src
else
  throw ''
    The ExecuTorch tree pins CMSIS-NN ${wanted} (CMSIS_NN_VERSION in backends/cortex_m/CMakeLists.txt),
    but the cmsis-nn input is ${have}. Build against the one the tree pins:
      --override-input cmsis-nn github:ARM-software/CMSIS-NN/${wanted}
  ''
