# CMSIS-NN's buffer-size Python module (its CMSISNN_BUILD_PYBIND target), built from the
# cmsis-nn input for the flake's Python by cortexm's own CMake project for it
# (kernels/cmsis_nn_helper: the bindings and only the C sources they reach), as cortexm builds
# it at run time for a tree of its own. The lowering sizes scratch with it, so a program is
# planned by the CMSIS-NN its runner runs, an `--override-input cmsis-nn` one too. cortexm
# takes it from $CORTEXM_CMSIS_NN_HELPER (cortexm/firmware/helper.py) for that tree instead of
# compiling one at run time with whatever compiler the host has.
{
  lib,
  stdenv,
  cmake,
  ninja,
  python,
  cmsis-nn-src,
}:
stdenv.mkDerivation {
  pname = "cmsis-nn-helper";
  version = cmsis-nn-src.shortRev or "unversioned";
  src = lib.fileset.toSource {
    root = ../kernels/cmsis_nn_helper;
    fileset = ../kernels/cmsis_nn_helper;
  };

  nativeBuildInputs = [
    cmake
    ninja
    (python.withPackages (ps: [ ps.pybind11 ])) # found through `python -m pybind11`, as CMSIS-NN does
  ];
  cmakeFlags = [
    "-DCMSIS_NN_SRC=${cmsis-nn-src}"
    "-DCMAKE_BUILD_TYPE=Release"
  ];

  # The module, and the record cortexm reads to tell which tree it was built from.
  installPhase = ''
    runHook preInstall
    mkdir -p $out/lib
    cp cmsis_nn*.so $out/lib/ # a Python extension is .so on Linux and macOS alike
    cat > $out/lib/helper.json <<EOF
    {"tree": "${cmsis-nn-src}", "identity": "cmsis-nn ${cmsis-nn-src.rev or "(a tree without a rev)"}, built by Nix"}
    EOF
    runHook postInstall
  '';

  meta = {
    description = "CMSIS-NN's buffer-size functions as a Python module, for planning scratch buffers";
    homepage = "https://github.com/ARM-software/CMSIS-NN";
    license = lib.licenses.asl20;
  };
}
