# The CI matrix from the flake itself: the GitHub-hosted runner for each system the flake
# exports, and one job per check of each, so a new check or system needs no workflow edit.
{ lib, checks }:
let
  # The runner each system builds on. macOS 15: the pinned tosa-tools wheels are built for it
  # (macosx_15_0_arm64); tests/project/test_nix.py compares the two.
  runners = {
    x86_64-linux = "ubuntu-24.04";
    aarch64-darwin = "macos-15";
  };
  runnerOf =
    system: runners.${system} or (throw "nix/github-actions.nix: no GitHub runner for ${system}");
in
{
  systems = map (system: {
    inherit system;
    os = runnerOf system;
  }) (lib.attrNames checks);
  checks = lib.concatLists (
    lib.mapAttrsToList (
      system: perSystem:
      map (check: {
        inherit system check;
        os = runnerOf system;
      }) (lib.attrNames perSystem)
    ) checks
  );
}
