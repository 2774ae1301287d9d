# A stand-in for nixpkgs, for evaluating the flake's own logic offline: the handful of
# nixpkgs functions and packages the flake calls, each taking the arguments nixpkgs' real one
# takes, and returning derivations that are never built.
# Where nixpkgs would reject a call (a missing argument, an invalid store name, a non-string
# `env` value, `getExe` of a package without `mainProgram`), this does too, so such mistakes
# fail the tests. It also rejects arguments nixpkgs' function does not know: nixpkgs would pass
# a misspelt `nativeBuildInput` on as an environment variable and build without it.
# It knows nothing of what the flake should produce.
# `lib` is nixpkgs' own (a nixpkgs.lib checkout) or tests/nix/lib-stand-in.nix: the caller says.
{ lib }:
{
  system,
  config ? { },
  overlays ? [ ],
}:
let
  inherit (lib) fix makeOverridable;

  isLinux = lib.hasSuffix "-linux" system;
  # Versions of the stand-in packages, changeable (JSON in $NIXPKGS_STAND_IN_VERSIONS) so tests
  # can take the branches the flake takes when nixpkgs has another version than the pinned one.
  versions = {
    flatbuffers = "25.12.19";
    gcc-arm-embedded-15 = "15.2.rel1";
  }
  // (
    let
      given = builtins.getEnv "NIXPKGS_STAND_IN_VERSIONS";
    in
    if given == "" then { } else builtins.fromJSON given
  );

  checkStoreName =
    name:
    if builtins.match "[A-Za-z0-9+_?=-][A-Za-z0-9+._?=-]*" name == null then
      throw "invalid store path name '${name}'"
    else
      name;

  # A real (never built) derivation: its store path follows from what goes into it, so the
  # graph between packages, string contexts and fixed-output hashes are Nix's own. The other
  # arguments stay readable on the result, as nixpkgs' derivations keep them.
  reserved = [
    "name"
    "system"
    "builder"
    "args"
    "outputs"
    "env"
  ];
  # The arguments of nixpkgs' functions, and the variables of the setup hooks the flake uses.
  phases = [
    "unpack"
    "patch"
    "configure"
    "build"
    "check"
    "install"
    "fixup"
    "installCheck"
    "dist"
  ];
  capitalise = s: lib.toUpper (builtins.substring 0 1 s) + builtins.substring 1 (builtins.stringLength s) s;
  mkDerivationArgs = [
    "name"
    "pname"
    "version"
    "src"
    "srcs"
    "sourceRoot"
    "patches"
    "outputs"
    "nativeBuildInputs"
    "buildInputs"
    "propagatedBuildInputs"
    "propagatedNativeBuildInputs"
    "nativeCheckInputs"
    "checkInputs"
    "nativeInstallCheckInputs"
    "installCheckInputs"
    "depsBuildBuild"
    "depsHostHost"
    "depsTargetTarget"
    "env"
    "meta"
    "passthru"
    "strictDeps"
    "__structuredAttrs"
    "phases"
    "buildCommand"
    "shellHook"
    "configureFlags"
    "cmakeFlags"
    "makeFlags"
    "buildFlags"
    "installFlags"
    "checkFlags"
    "doCheck"
    "doInstallCheck"
    "dontStrip"
    "dontPatchELF"
    "dontPatchShebangs"
    "enableParallelBuilding"
    "separateDebugInfo"
    "hardeningDisable"
    "allowedReferences"
    "disallowedReferences"
    "preferLocalBuild"
    "allowSubstitutes"
    "outputHash"
    "outputHashAlgo"
    "outputHashMode"
    "passAsFile"
    "requiredSystemFeatures"
    # setup hooks: cmake, autoPatchelfHook
    "dontUseCmakeConfigure"
    "ninjaFlags"
    "autoPatchelfIgnoreMissingDeps"
    "runtimeDependencies"
    "appendRunpaths"
    "dontAutoPatchelf"
  ]
  ++ lib.concatMap (phase: [
    "${phase}Phase"
    "pre${capitalise phase}"
    "post${capitalise phase}"
    "dont${capitalise phase}"
  ]) phases;
  buildPythonPackageArgs = mkDerivationArgs ++ [
    "format"
    "pyproject"
    "build-system"
    "dependencies"
    "optional-dependencies"
    "pythonImportsCheck"
    "pythonRemoveDeps"
    "pythonRelaxDeps"
    "pythonNamespaces"
    "makeWrapperArgs"
    "dontWrapPythonPrograms"
    "permitUserSite"
    "disabled"
    "disabledTests"
    "disabledTestPaths"
    "pytestFlags"
    "dontCheckRuntimeDeps"
    "pypaBuildFlags"
  ];
  # `args` when each of its names is one `fname` knows, else the error nixpkgs does not give.
  known =
    fname: names: args:
    let
      unknown = lib.filter (n: !(builtins.elem n names)) (builtins.attrNames args);
    in
    if unknown != [ ] then
      throw "${fname}: unknown argument `${lib.head unknown}` (nixpkgs' ${fname} does not take it)"
    else
      args;

  mkDerivation =
    argsOrFn:
    derivationOf (
      known "stdenv.mkDerivation" mkDerivationArgs (
        if builtins.isFunction argsOrFn then fix argsOrFn else argsOrFn
      )
    );
  # The derivation of nixpkgs-made arguments, e.g. buildEnv's (not checked: nixpkgs makes them).
  derivationOf =
    args:
    let
      name = checkStoreName (args.name or "${args.pname}-${args.version}");
      outputs = args.outputs or [ "out" ];
      env = args.env or { };
      badEnv = lib.filter (n: !(builtins.isString env.${n} || builtins.isBool env.${n} || builtins.isInt env.${n})) (
        builtins.attrNames env
      );
      isDrv = x: builtins.isAttrs x && x.type or null == "derivation";
      # A source (lib.fileset.toSource and cleanSourceWith give an attribute set with outPath):
      # nixpkgs passes it as its path, so its content is in the derivation's hash.
      isSource = x: builtins.isAttrs x && x ? outPath;
      # Strings, packages, sources, and lists of them, go into the derivation as nixpkgs passes them.
      passable =
        v:
        builtins.isString v
        || builtins.isBool v
        || builtins.isInt v
        || isDrv v
        || isSource v
        || (builtins.isList v && lib.all (x: x == null || builtins.isString x || isDrv x || isSource x) v);
      attrs = lib.filterAttrs (n: v: !(lib.elem n reserved) && passable v) args;
      real = derivation (
        attrs
        // env
        // {
          inherit name system outputs;
          builder = "/bin/sh";
          args = [
            "-c"
            "echo a nixpkgs stand-in cannot build; exit 1"
          ];
        }
      );
      drv =
        builtins.removeAttrs args [ "passthru" ]
        // (args.passthru or { })
        // real
        // {
          meta = args.meta or { };
          # What went into the derivation, as nixpkgs' derivations keep it.
          drvAttrs = attrs // env;
          # What an override adds must be something nixpkgs' mkDerivation takes.
          overrideAttrs =
            f:
            derivationOf (
              args
              // known "overrideAttrs" mkDerivationArgs (
                let
                  r = f args;
                in
                if builtins.isFunction r then r args else r
              )
            );
        };
    in
    if badEnv != [ ] then throw "${name}: env.${lib.head badEnv} is not a string" else drv;

  package =
    pname: version: extra:
    mkDerivation (
      {
        inherit pname version;
        meta.mainProgram = pname;
      }
      // extra
    );

  callPackageWith =
    scope: fn: args:
    let
      f = if builtins.isFunction fn then fn else import fn;
      wanted = builtins.functionArgs f;
      given = builtins.intersectAttrs wanted scope // args;
      missing = lib.filter (n: !wanted.${n} && !(given ? ${n})) (builtins.attrNames wanted);
    in
    if missing != [ ] then
      throw "callPackage: ${
        if builtins.isFunction fn then "a function" else toString fn
      } needs ${lib.head missing}, which nothing provides"
    else
      makeOverridable f given;

  # Formals without `...`: Nix itself rejects an argument nixpkgs' fetchurl does not take.
  fetchurl =
    {
      url,
      name ? baseNameOf url,
      sha256 ? null,
      hash ? null,
      sha512 ? null,
      urls ? [ ],
      executable ? false,
      postFetch ? "",
      curlOpts ? "",
      curlOptsList ? [ ],
      downloadToTemp ? false,
      recursiveHash ? false,
      meta ? { },
      passthru ? { },
    }:
    assert sha256 != null || hash != null;
    fixedOutput name "flat" (if hash != null then hash else "sha256:${sha256}");

  fixedOutput =
    name: outputHashMode: outputHash:
    mkDerivation {
      inherit name outputHashMode outputHash;
      outputHashAlgo = "";
    };

  mkPython =
    pyArgs:
    let
      interpreter = {
        pythonVersion = "3.11";
        sitePackages = "lib/python3.11/site-packages";
        interpreter = "${package "python3" "3.11" { }}/bin/python3.11";
        override = newArgs: mkPython (pyArgs // newArgs);
        pkgs = pythonPackages;
        withPackages = f: interpreter.buildEnv.override { extraLibs = f pythonPackages; };
        buildEnv = makeOverridable (
          {
            extraLibs ? [ ],
            makeWrapperArgs ? [ ],
            extraOutputsToInstall ? [ ],
            postBuild ? "",
            ignoreCollisions ? false,
            permitUserSite ? false,
          }:
          derivationOf {
            name = "python3-3.11-env";
            inherit extraLibs makeWrapperArgs;
            meta.mainProgram = "python3";
          }
        ) { };
      };
      buildPythonPackage =
        givenArgs:
        let
          args = known "buildPythonPackage" buildPythonPackageArgs givenArgs;
        in
        assert lib.assertMsg (
          (args ? format) != (args ? pyproject)
        ) "buildPythonPackage ${args.pname}: set one of format and pyproject";
        assert lib.all (d: d == null || d.type or null == "derivation") (args.dependencies or [ ]);
        mkDerivation (
          removeAttrs args (lib.filter (n: !(builtins.elem n mkDerivationArgs)) buildPythonPackageArgs)
          // {
            name = "python3.11-${args.pname}-${args.version}";
            passthru = args.passthru or { } // {
              # What nixpkgs' buildPythonPackage keeps readable on the package.
              inherit (args) pname version;
              dependencies = args.dependencies or [ ];
              optional-dependencies = args.optional-dependencies or { };
              pythonRemoveDeps = args.pythonRemoveDeps or [ ];
              makeWrapperArgs = args.makeWrapperArgs or [ ];
            };
          }
        );
      leaf = pname: package pname "1" { };
      base = ps: {
        python = interpreter;
        inherit buildPythonPackage;
        callPackage = callPackageWith (pkgs // ps);
      }
      // lib.genAttrs [
        "capstone"
        "click"
        "filelock"
        "flatbuffers"
        "fsspec"
        "hypothesis"
        "jinja2"
        "junitparser"
        "jsonschema"
        "ml-dtypes"
        "mpmath"
        "networkx"
        "numpy"
        "packaging"
        "poetry-core"
        "pybind11"
        "pyelftools"
        "pytest"
        "pytest-xdist"
        "pyyaml"
        "rich"
        "ruamel-yaml"
        "semver"
        "setuptools"
        "sympy"
        "tabulate"
        "typing-extensions"
      ] leaf;
      overrides = pyArgs.packageOverrides or (_: _: { });
      pythonPackages = fix (ps: base ps // overrides ps (base ps));
    in
    interpreter;

  pkgs = fix (
    self:
    let
      base = {
        inherit lib config;
        stdenv = {
          inherit mkDerivation;
          hostPlatform = {
            inherit system isLinux;
          };
          # The wrapped compiler (a package), and the unwrapped one as its `cc`.
          cc = package "gcc-wrapper" "14" { passthru.cc = package "gcc" "14" { }; };
        };
        stdenvNoCC = {
          inherit mkDerivation;
          hostPlatform = self.stdenv.hostPlatform;
        };
        newScope = extra: callPackageWith (self // extra);
        callPackage = callPackageWith self;
        inherit fetchurl;
        fetchFromGitHub =
          {
            owner,
            repo,
            rev ? null,
            tag ? null,
            hash,
            name ? "source",
            fetchSubmodules ? false,
            leaveDotGit ? false,
            postFetch ? "",
            meta ? { },
            passthru ? { },
          }:
          assert rev != null || tag != null;
          fixedOutput "source" "recursive" hash;
        requireFile =
          {
            name,
            message,
            sha256 ? null,
            hash ? null,
            sha1 ? null,
            url ? null,
            hashMode ? "flat",
          }:
          assert sha256 != null || hash != null;
          fixedOutput name "flat" (if hash != null then hash else "sha256:${sha256}");
        runCommand = name: env: buildCommand: mkDerivation (env // { inherit name buildCommand; });
        runCommandCC = name: env: buildCommand: mkDerivation (env // { inherit name buildCommand; });
        writeShellApplication =
          {
            name,
            text,
            runtimeInputs ? [ ],
            runtimeEnv ? null,
            meta ? { },
            passthru ? { },
            checkPhase ? null,
            excludeShellChecks ? [ ],
            extraShellCheckFlags ? [ ],
            bashOptions ? [ ],
            inheritPath ? true,
            derivationArgs ? { },
          }:
          derivationOf {
            inherit name text runtimeInputs;
            runtimeEnv = lib.mapAttrs (
              n: v: if builtins.isString v then v else throw "runtimeEnv.${n} is not a string"
            ) (if runtimeEnv == null then { } else runtimeEnv);
            meta.mainProgram = name;
          };
        mkShell =
          {
            name ? "nix-shell",
            packages ? [ ],
            inputsFrom ? [ ],
            ...
          }@args:
          mkDerivation (
            removeAttrs args [
              "packages"
              "inputsFrom"
            ]
            // {
              inherit name;
              nativeBuildInputs = args.nativeBuildInputs or [ ] ++ packages;
            }
          );
        autoPatchelfHook = package "auto-patchelf-hook" "1" { };
        cmake = package "cmake" "3.31" { };
        ninja = package "ninja" "1.12" { };
        qemu = package "qemu" "10.0" { meta.mainProgram = "qemu-kvm"; };
        zlib = package "zlib" "1.3.1" { };
        removeReferencesTo = package "remove-references-to" "1" { meta.mainProgram = "remove-references-to"; };
        nixfmt-tree = package "nixfmt-tree" "1" { meta.mainProgram = "treefmt"; };
        flatbuffers = package "flatbuffers" versions.flatbuffers { meta.mainProgram = "flatc"; };
        gcc-arm-embedded-15 = package "gcc-arm-embedded" versions.gcc-arm-embedded-15 { };
        python311 = mkPython { };
      };
    in
    lib.foldl' (acc: overlay: acc // overlay self acc) base overlays
  );
in
pkgs
