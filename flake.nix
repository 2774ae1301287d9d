{
  description = "cortexm: a reproducible toolchain and tester for the ExecuTorch Cortex-M (CMSIS-NN) backend";

  # Every pin is in pins.toml; flake inputs must be literals, so these repeat its revs and
  # the `pins` check fails when flake.lock and pins.toml disagree (an override is reported, not
  # failed). To test a local ExecuTorch:
  #   nix run .#test-m7 --override-input executorch path:/my/executorch
  # (git+file:///my/executorch takes only its tracked files, without the submodules.)
  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/b12141ef619e0a9c1c84dc8c684040326f27cdcc";
    executorch = {
      url = "github:pytorch/executorch/3b60683923245cf472b7323426920e15623ba361";
      flake = false;
    };
    cmsis-nn = {
      url = "github:ARM-software/CMSIS-NN/dbf45dbfcc515421dd6099037d3e2637b90748c8";
      flake = false;
    };
  };

  outputs =
    { nixpkgs, ... }@inputs:
    let
      inherit (nixpkgs) lib;
      pins = builtins.fromTOML (builtins.readFile ./pins.toml);
      # The systems whose whole closure builds; CI builds exactly these (nix/github-actions.nix).
      # Not aarch64-linux: PyPI's torch 2.13.0 there is a CUDA 13 build whose libraries link
      # CUDA, which the flake does not provide; the +cpu aarch64 wheel is not pinned yet.
      systems = [
        "x86_64-linux"
        "aarch64-darwin"
      ];
      # Cores with board support for a runner (cortexm/base/targets.py; a test keeps the two equal).
      cores = [
        "m3"
        "m4"
        "m7"
        "m33"
        "m55"
      ];

      # The toolchain, runners, CLI and checks over a nixpkgs (nix/packages.nix).
      scopeFor =
        pkgs:
        import ./nix/packages.nix {
          inherit
            pkgs
            pins
            inputs
            cores
            ;
        };
      forAllSystems =
        f:
        lib.genAttrs systems (
          system:
          f (scopeFor (
            import nixpkgs {
              inherit system;
              # The one unfree package; adding its archive to the store is the EULA step.
              config.allowUnfreePredicate = pkg: lib.getName pkg == "fvp-corstone-300";
            }
          ))
        );
      app = description: drv: {
        type = "app";
        program = lib.getExe drv;
        meta = { inherit description; };
      };
    in
    {
      packages = forAllSystems (
        s:
        {
          inherit (s) cortexm arduino-lib;
          default = s.cortexm;
        }
        // lib.optionalAttrs (s.fvp-corstone-300 != null) { inherit (s) fvp-corstone-300; }
        // lib.concatMapAttrs (core: kernels: {
          "kernels-${core}" = kernels;
          "runner-${core}" = kernels.runner;
        }) (lib.genAttrs cores (core: s.kernels "cortex-${core}"))
      );

      apps = forAllSystems (
        s:
        {
          test-m7 = app "cortexm test on the Cortex-M7 (QEMU, or the FVP when present)" (s.testApp "cortex-m7");
          test-m55 = app "cortexm test on the Cortex-M55 (QEMU, or the FVP when present)" (
            s.testApp "cortex-m55"
          );
          verify = app "cortexm verify: check .pte programs against a kernel library and a core" (
            s.command "verify"
          );
          default = app "the cortexm command line" s.cortexm;
        }
        # With the FVP given (its archive added to the store: fvp/package.nix), and its board's runner.
        // lib.optionalAttrs (s.fvp-corstone-300 != null) {
          test-m7-fvp = app "cortexm test on the Cortex-M7 on the Corstone-300 FVP" (
            (s.testApp "cortex-m7").override { fvp = s.fvp-corstone-300; }
          );
          test-m55-fvp = app "cortexm test on the Cortex-M55 on the Corstone-300 FVP" (
            (s.testApp "cortex-m55").override { fvp = s.fvp-corstone-300; }
          );
        }
      );

      devShells = forAllSystems (
        s:
        {
          default = s.devShell;
        }
        // lib.optionalAttrs (s.fvp-corstone-300 != null) {
          fvp = s.devShell.override { fvp = s.fvp-corstone-300; };
        }
      );

      checks = forAllSystems (s: s.checks);

      # The scope itself (nix/packages.nix): the toolchain, `kernels "cortex-m7"` and its runner,
      # the Python set, the source trees. Without makeScope's `packages` (the scope's function):
      # Nix looks `.#packages.<system>` up under legacyPackages.<system> too, and stops there.
      legacyPackages = forAllSystems (s: removeAttrs s [ "packages" ]);

      # The same over another flake's nixpkgs: `cortexmPackages` (that scope) and `cortexm` (the
      # CLI). tests/nix/consumer/flake.nix is an example.
      overlays.default = final: prev: {
        cortexmPackages = scopeFor final;
        inherit (final.cortexmPackages) cortexm;
      };

      formatter = forAllSystems (s: s.pkgs.nixfmt-tree);

      # The CI matrix, read by .github/workflows/ci.yml (as nix-github-actions does).
      githubActions = import ./nix/github-actions.nix {
        inherit lib;
        inherit (inputs.self) checks;
      };
    };
}
