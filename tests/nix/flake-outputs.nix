# The outputs of a checkout's flake.nix, called as Nix calls it, with `nixpkgs` (a folder whose
# default.nix is nixpkgs-stand-in.nix over a lib, and lib/ that lib) as nixpkgs. Inputs are
# what flake.lock locks; an input flake.lock does not hold yet (Nix locks it on first use) has
# its flake.nix rev and no narHash; an input named in `overridden` is what
# `--override-input NAME path:...` gives: a tree without rev. `executorch-tree` is a folder
# standing in for the ExecuTorch tree (it needs backends/cortex_m/CMakeLists.txt).
{
  root,
  executorch-tree,
  nixpkgs,
  overridden ? [ ],
}:
let
  flake = import (root + "/flake.nix");
  lock = builtins.fromJSON (builtins.readFile (root + "/flake.lock"));
  rootInputs = lock.nodes.${lock.root}.inputs;
  lastSegment = url: builtins.elemAt (builtins.match ".*/([^/]+)" url) 0;

  input =
    name: outPath:
    if builtins.elem name overridden then
      {
        inherit outPath;
        narHash = "sha256-${builtins.hashString "sha256" name}";
      }
    else if rootInputs ? ${name} then
      let
        locked = lock.nodes.${rootInputs.${name}}.locked;
      in
      {
        inherit outPath;
        inherit (locked) rev narHash;
      }
    else
      {
        inherit outPath;
        rev = lastSegment flake.inputs.${name}.url;
      };

  inputs = {
    self = outputs // {
      outPath = toString root;
    };
    nixpkgs = input "nixpkgs" nixpkgs // {
      lib = import (nixpkgs + "/lib");
    };
    executorch = input "executorch" executorch-tree;
    cmsis-nn = input "cmsis-nn" "/nix/store/00000000000000000000000000000000-cmsis-nn-source";
  };
  outputs = flake.outputs inputs;
in
outputs
