# What a checkout's flake produces with nixpkgs-stand-in.nix as its nixpkgs, as plain data
# for tests/project/test_nix.py: the outputs per system, and what each system's derivations are made
# of (which forces every one of them).
{
  root,
  executorch-tree,
  nixpkgs,
  overridden ? [ ],
}:
let
  outputs = import ./flake-outputs.nix {
    inherit
      root
      executorch-tree
      nixpkgs
      overridden
      ;
  };
  lib = import (nixpkgs + "/lib");
  nameOf = drv: drv.pname or (builtins.parseDrvName drv.name).name;

  names = builtins.mapAttrs (_: builtins.attrNames);
  # Python packages and everything they depend on, each once.
  pythonClosure =
    drvs:
    map (item: item.drv) (
      builtins.genericClosure {
        startSet = map (drv: {
          key = drv.name;
          inherit drv;
        }) drvs;
        operator =
          item:
          map (drv: {
            key = drv.name;
            inherit drv;
          }) (item.drv.dependencies or [ ]);
      }
    );
  outPaths = builtins.mapAttrs (_: drv: drv.outPath);
  drvPaths = builtins.mapAttrs (_: drv: drv.drvPath);
  # The derivations (.drv) a derivation's attributes name: what has to be built before it.
  inputDrvs =
    drv:
    builtins.filter (lib.hasSuffix ".drv") (
      builtins.attrNames (builtins.getContext (builtins.toJSON drv.drvAttrs))
    );

  # tests/nix/consumer/flake.nix with this checkout as its cortexm input and nixpkgs following
  # cortexm's, as `nix flake` gives them.
  consumerFlake = import ./consumer/flake.nix;
  consumer = consumerFlake.outputs {
    self = consumer;
    cortexm = outputs // {
      outPath = toString root;
    };
    nixpkgs = {
      outPath = nixpkgs;
      inherit lib;
    };
  };
in
{
  packages = names outputs.packages;
  apps = builtins.mapAttrs (
    _:
    builtins.mapAttrs (
      _: app: {
        inherit (app) type program;
        inherit (app.meta) description;
      }
    )
  ) outputs.apps;
  devShells = names outputs.devShells;
  checks = names outputs.checks;
  formatter = builtins.mapAttrs (_: f: f.name) outputs.formatter;
  # The CI matrix (nix/github-actions.nix).
  inherit (outputs) githubActions;
  # What the `pins` check finds wrong, per system ("" when pins.toml and flake.lock agree).
  pinsProblems = builtins.mapAttrs (_: checks: checks.pins.env.problems) outputs.checks;
  # What it reports without failing (overridden inputs), likewise.
  pinsNotes = builtins.mapAttrs (_: checks: checks.pins.env.notes) outputs.checks;
  # Which lib the evaluation used: nixpkgs' reports its release.
  libVersion = lib.version or "stand-in";

  # Every output's derivation, per system (an app: its program).
  drvPaths = builtins.mapAttrs (system: packages: {
    packages = drvPaths packages;
    checks = drvPaths outputs.checks.${system};
    devShells = drvPaths outputs.devShells.${system};
    apps = builtins.mapAttrs (_: app: app.program) outputs.apps.${system};
  }) outputs.packages;

  # The sources the pytest check's checkout is made of, per system.
  pytestSources = builtins.mapAttrs (_: checks: checks.pytest.sources) outputs.checks;

  # The example consumer's packages (as drvPaths) and its flake inputs.
  consumer = {
    inputs = consumerFlake.inputs;
    packages = builtins.mapAttrs (_: drvPaths) consumer.packages;
  };

  # What each system's derivations are made of, forcing every one of them.
  systems = builtins.mapAttrs (
    system: packages:
    let
      cli = packages.cortexm;
      cortexmPython = builtins.head cli.extraLibs;
      kernels = packages.kernels-m7;
      scope = outputs.legacyPackages.${system};
      # A test app as the flake's apps run it, and the runners it carries.
      testApp = app: {
        program = lib.getExe app;
        runners = lib.splitString ":" app.runtimeEnv.CORTEXM_RUNNERS;
      };
    in
    {
      packages = outPaths packages;
      checks = outPaths outputs.checks.${system};
      devShells = outPaths outputs.devShells.${system};
      cliWrapperArgs = cli.makeWrapperArgs;
      cortexmWrapperArgs = cortexmPython.makeWrapperArgs;
      wheels = map (d: {
        inherit (d) pname version;
        src = d.src.name or null;
        # What autoPatchelfHook is given to resolve the wheel's libraries with.
        buildInputs = map nameOf (d.buildInputs or [ ]);
        nativeBuildInputs = map nameOf (d.nativeBuildInputs or [ ]);
        hash = d.src.outputHash or null;
        meta = {
          description = d.meta.description or null;
          homepage = d.meta.homepage or null;
          license = d.meta.license.shortName or null;
          platforms = d.meta.platforms or null;
        };
        dependencies = map nameOf (d.dependencies or [ ]);
      }) (pythonClosure cortexmPython.dependencies);
      removedDeps = cortexmPython.pythonRemoveDeps;
      cortexmDependencies = map nameOf cortexmPython.dependencies;
      cortexmTestDependencies = map nameOf cortexmPython.optional-dependencies.test;
      kernelsEnv = kernels.env;
      kernelsInputDrvs = inputDrvs kernels;
      kernelsDisallowedReferences = kernels.disallowedReferences;
      trees = map toString [
        scope.executorch-src
        scope.cmsis-nn-src
      ];
      helperDrv = scope.cmsis-nn-helper.drvPath;
      testApps = {
        test-m7 = testApp (scope.testApp "cortex-m7");
      }
      // lib.optionalAttrs (scope.fvp-corstone-300 != null) {
        test-m7-fvp = testApp ((scope.testApp "cortex-m7").override { fvp = scope.fvp-corstone-300; });
      };
      toolchainDrv = scope.gcc-arm-embedded.drvPath;
      kernelsOutputs = kernels.outputs;
      kernelsPython = map (d: d.name) (builtins.elemAt kernels.nativeBuildInputs 2).extraLibs;
      runnerM7 = packages.runner-m7.outPath;
      qemuM7Runners = outputs.checks.${system}.qemu-m7.env.CORTEXM_RUNNERS;
      devShellEnv = outputs.devShells.${system}.default.env;
    }
  ) outputs.packages;
}
