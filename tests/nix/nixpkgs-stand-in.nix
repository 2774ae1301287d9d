# A stand-in for nixpkgs, for evaluating the flake's own logic offline: the handful of
# nixpkgs functions and packages the flake calls, each taking the arguments nixpkgs' real one
# takes, and returning derivations that are never built.
# Where nixpkgs would reject a call (a missing argument, an invalid store name, a non-string
# `env` value, `getExe` of a package without `mainProgram`), this does too, so such mistakes
# fail the tests. It knows nothing of what the flake should produce.
{
  system,
  config ? { },
  overlays ? [ ],
}:
let
  lib = import ./lib-stand-in.nix;
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
  mkDerivation =
    argsOrFn:
    let
      args = if builtins.isFunction argsOrFn then fix argsOrFn else argsOrFn;
      name = checkStoreName (args.name or "${args.pname}-${args.version}");
      outputs = args.outputs or [ "out" ];
      env = args.env or { };
      badEnv = lib.filter (n: !(builtins.isString env.${n} || builtins.isBool env.${n} || builtins.isInt env.${n})) (
        builtins.attrNames env
      );
      isDrv = x: builtins.isAttrs x && x.type or null == "derivation";
      # Strings, packages, and lists of them, go into the derivation as nixpkgs passes them.
      passable =
        v:
        builtins.isString v
        || builtins.isBool v
        || builtins.isInt v
        || isDrv v
        || (builtins.isList v && lib.all (x: x == null || builtins.isString x || isDrv x) v);
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
          overrideAttrs =
            f:
            mkDerivation (
              args
              // (
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
      throw "callPackage: ${toString fn} needs ${lib.head missing}, which nothing provides"
    else
      makeOverridable f given;

  fetchurl =
    {
      url,
      name ? baseNameOf url,
      sha256 ? null,
      hash ? null,
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
          }:
          mkDerivation {
            name = "python3-3.11-env";
            inherit extraLibs makeWrapperArgs;
            meta.mainProgram = "python3";
          }
        ) { };
      };
      buildPythonPackage =
        args:
        assert lib.assertMsg (
          (args ? format) != (args ? pyproject)
        ) "buildPythonPackage ${args.pname}: set one of format and pyproject";
        assert lib.all (d: d == null || d.type or null == "derivation") (args.dependencies or [ ]);
        mkDerivation (args // { name = "python3.11-${args.pname}-${args.version}"; });
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
        "jsonschema"
        "ml-dtypes"
        "mpmath"
        "networkx"
        "numpy"
        "packaging"
        "poetry-core"
        "pyelftools"
        "pytest"
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
          cc.cc = package "gcc" "14" { };
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
          }:
          assert rev != null || tag != null;
          fixedOutput "source" "recursive" hash;
        requireFile =
          {
            name,
            message,
            sha256 ? null,
            hash ? null,
          }:
          assert sha256 != null || hash != null;
          fixedOutput name "flat" (if hash != null then hash else "sha256:${sha256}");
        runCommand = name: env: buildCommand: mkDerivation (env // { inherit name buildCommand; });
        writeShellApplication =
          {
            name,
            text,
            runtimeInputs ? [ ],
            runtimeEnv ? null,
          }:
          mkDerivation {
            inherit name text runtimeInputs;
            runtimeEnv = lib.mapAttrs (
              n: v: if builtins.isString v then v else throw "runtimeEnv.${n} is not a string"
            ) (if runtimeEnv == null then { } else runtimeEnv);
            meta.mainProgram = name;
          };
        mkShell =
          {
            packages ? [ ],
            ...
          }@args:
          mkDerivation (args // { name = "nix-shell"; });
        autoPatchelfHook = package "auto-patchelf-hook" "1" { };
        cmake = package "cmake" "3.31" { };
        ninja = package "ninja" "1.12" { };
        qemu = package "qemu" "10.0" { meta.mainProgram = "qemu-kvm"; };
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
