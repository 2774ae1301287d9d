# What a checkout's flake produces with nixpkgs-stand-in.nix as its nixpkgs, as plain data
# for tests/test_nix.py: the outputs per system, and what each system's derivations are made
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

  # What each system's derivations are made of, forcing every one of them.
  systems = builtins.mapAttrs (
    system: packages:
    let
      cli = packages.cortexm;
      cortexmPython = builtins.head cli.extraLibs;
      kernels = packages.kernels-m7;
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
      kernelsOutputs = kernels.outputs;
      kernelsPython = map (d: d.name) (builtins.elemAt kernels.nativeBuildInputs 2).extraLibs;
      runnerM7 = packages.runner-m7.outPath;
      qemuM7Runners = outputs.checks.${system}.qemu-m7.env.CORTEXM_RUNNERS;
      devShellEnv = outputs.devShells.${system}.default.env;
    }
  ) outputs.packages;
}
