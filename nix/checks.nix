# `nix flake check`: everything here runs offline in the sandbox. The pin file agrees with the
# locked inputs; the runner builds for every core; the Python tests; the dialect goldens; and
# the built-in suite on QEMU with the pinned runners of the M7 and the M55.
{
  lib,
  runCommand,
  runCommandCC,
  pins,
  inputs,
  cores,
  kernels,
  cortexm,
  python,
  qemu,
  cmake,
  ninja,
  toolEnv,
}:
let
  # The tests and the files they read that the package's sources leave out, added to those in
  # the checks' writable checkout: every .nix file (tests/project/test_nix.py reads and evaluates the
  # flake), the lock, and the bench files tests/project/test_bench_mutants.py and test_repro.py take.
  # Without documentation, as the package's sources: a README edit reruns no check.
  nixFiles = lib.fileset.fileFilter (file: file.hasExt "nix") ../.;
  docs = lib.fileset.fileFilter (file: file.hasExt "md") ../.;
  testFiles = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.difference (lib.fileset.union nixFiles (lib.fileset.unions [
      ../tests
      ../flake.lock
      ../bench/mutants.py
      ../bench/mutants
      ../bench/repro
    ])) docs;
  };

  # The pinned inputs as flake.lock (the file) records them and as this evaluation got them.
  lock = lib.importJSON ../flake.lock;
  pinned = {
    inherit (pins) executorch cmsis-nn;
  }
  // lib.optionalAttrs (pins ? nixpkgs) { inherit (pins) nixpkgs; };
  lockedIn =
    name:
    let
      node = lock.nodes.${lock.root}.inputs.${name} or null;
    in
    if node == null then null else lock.nodes.${node}.locked;

  # Where flake.lock and pins.toml disagree, one line each: these fail the check.
  lockProblems = lib.concatLists (
    lib.mapAttrsToList (
      name: pin:
      let
        locked = lockedIn name;
        narHash = locked.narHash or null;
      in
      if locked == null then
        lib.optional (pin.nar_hash != "") "${name}: pinned with a nar_hash but not in flake.lock (run nix flake lock)"
      else
        lib.optional (locked.rev != pin.rev) "${name}: locked at ${locked.rev}, pins.toml pins ${pin.rev}"
        ++ lib.optional (
          narHash != null && pin.nar_hash != "" && narHash != pin.nar_hash
        ) "${name}: locked narHash ${narHash}, pins.toml has ${pin.nar_hash}"
    ) pinned
  );

  # Inputs this evaluation got otherwise than flake.lock records them: an --override-input
  # (the README's way to test a local tree) or Nix locking an input the file lacks. Reported,
  # not failed: they are the user's choice, and pins.toml still says what is pinned.
  lockNotes = lib.concatLists (
    lib.mapAttrsToList (
      name: pin:
      let
        input = inputs.${name};
        locked = lockedIn name;
        got = if input ? rev then "${input.rev} (narHash ${input.narHash or "unknown"})" else "a tree without a rev";
      in
      if locked == null && input.rev or null == pin.rev then
        [
          "${name}: not in flake.lock; locked now at ${got}: commit the lock and record its narHash as nar_hash in pins.toml"
        ]
      # A first networked lock wrote the hash pins.toml could not establish: reported until it
      # is recorded there, not failed (flake.lock is what Nix checks the tree against).
      else if locked.narHash or null != null && pin.nar_hash == "" then
        [ "${name}: flake.lock has narHash ${locked.narHash}; record it as nar_hash in pins.toml" ]
      else
        lib.optional (
          locked == null || input.rev or null != locked.rev || input.narHash or null != locked.narHash or null
        ) "${name}: overridden with ${got}; pins.toml pins ${pin.rev}, not checked"
    ) pinned
  );

  # A script run in that checkout, with cortexm and QEMU (`run`: runCommand, or runCommandCC
  # where a C compiler is needed).
  inSourceWith =
    run: name: env: script:
    run "cortexm-${name}"
      (
        {
          nativeBuildInputs = [
            cortexm
            qemu
          ];
          # What the checkout is made of (tests/project/test_nix.py runs the tests' collection in it).
          passthru.sources = [
            python.pkgs.cortexm.src
            testFiles
          ];
        }
        // env
      )
      ''
        cp -r ${python.pkgs.cortexm.src} source && chmod -R u+w source
        cp -r ${testFiles}/. source/ && chmod -R u+w source && cd source
        export HOME=$TMPDIR XDG_CACHE_HOME=$TMPDIR/cache
        mkdir -p $out
        ${script}
      '';
  inSource = inSourceWith runCommand;

  qemuSuite =
    core:
    inSource "qemu-${core}" { env.CORTEXM_RUNNERS = "${(kernels "cortex-${core}").runner}"; } ''
      cortexm test --target cortex-${core} --sim qemu --junit $out/junit.xml --json $out/report.json
    '';
in
{
  # Fails on lockProblems; prints lockNotes when evaluated and keeps them in $out.
  pins =
    lib.warnIf (lockNotes != [ ]) "cortexm pins: ${lib.concatStringsSep "; " lockNotes}"
      runCommand
      "cortexm-pins"
      {
        env = {
          problems = lib.concatStringsSep "\n" lockProblems;
          notes = lib.concatStringsSep "\n" lockNotes;
        };
      }
      ''
        if [ -n "$problems" ]; then
          echo "pins.toml and flake.lock disagree:" >&2
          echo "$problems" >&2
          exit 1
        fi
        echo "$notes" | tee $out
      '';

  # With a C compiler: the host (ASan/UBSan) runner tests run instead of skipping.
  pytest =
    inSourceWith runCommandCC "pytest"
      {
        nativeBuildInputs = [
          (python.withPackages (ps: [ ps.cortexm ] ++ ps.cortexm.optional-dependencies.test))
          qemu
          cmake
          ninja
        ];
        env = toolEnv;
      }
      ''
        python -m pytest -p no:cacheprovider --junitxml=$out/junit.xml
      '';

  goldens = inSource "goldens" { } ''
    cortexm dialect --all -t cortex-m7 -t cortex-m55 --goldens tests/goldens
  '';

  qemu-m7 = qemuSuite "m7";
  qemu-m55 = qemuSuite "m55";
}
// lib.listToAttrs (
  map (core: lib.nameValuePair "runner-${core}" (kernels "cortex-${core}").runner) cores
)
