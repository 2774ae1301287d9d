# An example of another flake taking cortexm's toolchain, runners and command line through its
# overlay, over that flake's nixpkgs (here it follows cortexm's, so the packages are the very
# ones cortexm's flake builds). tests/project/test_nix.py evaluates it with a checkout as cortexm
# (`--override-input cortexm path:...`); a flake of yours names cortexm's repository instead.
{
  inputs = {
    cortexm.url = "path:../../..";
    nixpkgs.follows = "cortexm/nixpkgs";
  };

  outputs =
    { nixpkgs, cortexm, ... }:
    {
      packages =
        nixpkgs.lib.genAttrs
          [
            "x86_64-linux"
            "aarch64-darwin"
          ]
          (
            system:
            let
              pkgs = import nixpkgs {
                inherit system;
                overlays = [ cortexm.overlays.default ];
              };
            in
            {
              # The command line, with the toolchain, QEMU and the pinned trees it drives.
              inherit (pkgs) cortexm;
              # The Arm GNU Toolchain at the version cortexm pins.
              arm-none-eabi-gcc = pkgs.cortexmPackages.gcc-arm-embedded;
              # A core's runner, and a core's kernel libraries to link into firmware of your own.
              runner-m7 = (pkgs.cortexmPackages.kernels "cortex-m7").runner;
              kernels-m55 = pkgs.cortexmPackages.kernels "cortex-m55";
            }
          );
    };
}
