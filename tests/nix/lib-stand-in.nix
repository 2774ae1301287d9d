# A stand-in for nixpkgs' `lib`: only the functions the flake and nixpkgs-stand-in.nix use,
# with the semantics of nixpkgs' own (its lib/), written over builtins.
let
  lib = rec {
    inherit (builtins)
      head
      filter
      all
      any
      attrNames
      elem
      isList
      concatLists
      concatStringsSep
      listToAttrs
      mapAttrs
      replaceStrings
      ;
    foldl' = builtins.foldl';
    fix =
      f:
      let
        x = f x;
      in
      x;
    nameValuePair = name: value: { inherit name value; };
    last = list: builtins.elemAt list (builtins.length list - 1);
    unique = foldl' (acc: e: if elem e acc then acc else acc ++ [ e ]) [ ];
    genAttrs = names: f: listToAttrs (map (n: nameValuePair n (f n)) names);
    filterAttrs =
      pred: attrs:
      listToAttrs (
        map (n: nameValuePair n attrs.${n}) (filter (n: pred n attrs.${n}) (builtins.attrNames attrs))
      );
    mapAttrsToList = f: attrs: map (n: f n attrs.${n}) (builtins.attrNames attrs);
    concatMapAttrs = f: attrs: foldl' (acc: n: acc // f n attrs.${n}) { } (builtins.attrNames attrs);
    concatMap = f: list: concatLists (map f list);
    concatMapStringsSep = sep: f: list: concatStringsSep sep (map f list);
    toUpper = replaceStrings (lowerChars) (upperChars);
    lowerChars = stringToCharacters "abcdefghijklmnopqrstuvwxyz";
    upperChars = stringToCharacters "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    stringToCharacters = s: builtins.genList (p: builtins.substring p 1 s) (builtins.stringLength s);
    warnIf = cond: msg: value: if cond then builtins.trace "warning: ${msg}" value else value;
    optional = cond: x: if cond then [ x ] else [ ];
    optionals = cond: xs: if cond then xs else [ ];
    optionalAttrs = cond: attrs: if cond then attrs else { };
    optionalString = cond: s: if cond then s else "";
    assertMsg = pred: msg: pred || throw msg;
    findFirst =
      pred: default: list:
      let
        found = filter pred list;
      in
      if found == [ ] then default else head found;
    hasPrefix = prefix: s: builtins.substring 0 (builtins.stringLength prefix) s == prefix;
    hasSuffix =
      suffix: s:
      let
        n = builtins.stringLength s;
        k = builtins.stringLength suffix;
      in
      n >= k && builtins.substring (n - k) k s == suffix;
    removePrefix =
      prefix: s:
      if hasPrefix prefix s then
        builtins.substring (builtins.stringLength prefix) (builtins.stringLength s) s
      else
        s;
    # As nixpkgs': the characters a POSIX regex gives a meaning (an escaped ":" is invalid there).
    escapeRegex = replaceStrings [ "\\" "[" "{" "(" ")" "^" "$" "?" "*" "+" "|" "." ] [
      "\\\\"
      "\\["
      "\\{"
      "\\("
      "\\)"
      "\\^"
      "\\$"
      "\\?"
      "\\*"
      "\\+"
      "\\|"
      "\\."
    ];
    splitString = sep: s: filter builtins.isString (builtins.split (escapeRegex sep) s);
    importTOML = path: builtins.fromTOML (builtins.readFile path);
    importJSON = path: builtins.fromJSON (builtins.readFile path);

    getName =
      x: if builtins.isString x then (builtins.parseDrvName x).name else x.pname or (builtins.parseDrvName x.name).name;
    getLib = drv: drv.lib or drv;
    getBin = drv: drv.bin or drv;
    getExe =
      drv:
      if drv.meta ? mainProgram then
        "${getBin drv}/bin/${drv.meta.mainProgram}"
      else
        throw "getExe: ${drv.name} has no meta.mainProgram";
    makeBinPath = paths: concatStringsSep ":" (map (p: "${getBin p}/bin") paths);
    addMetaAttrs = newAttrs: drv: drv // { meta = (drv.meta or { }) // newAttrs; };

    makeOverridable =
      f: args:
      let
        result = f args;
      in
      if builtins.isAttrs result then
        result // { override = newArgs: makeOverridable f (args // newArgs); }
      else
        result;
    makeScope =
      newScope: f:
      let
        self = f self // {
          newScope = scope: newScope (self // scope);
          callPackage = self.newScope { };
        };
      in
      self;

    # A file set is the paths it was made of (each must exist) and `has`: whether a file is in
    # it, and whether a folder may hold one that is. toSource is builtins.path over `has`, so a
    # source's store path follows the content of exactly its files, as nixpkgs' does.
    fileset =
      let
        ofPath =
          p:
          let
            s = toString p;
          in
          {
            paths = [ p ];
            has = path: type: path == s || hasPrefix "${s}/" path || type == "directory" && hasPrefix "${path}/" s;
          };
        coerce = x: if builtins.isAttrs x && x ? has then x else ofPath x;
        unions =
          list:
          let
            sets = map coerce list;
          in
          {
            paths = concatMap (s: s.paths) sets;
            has = path: type: any (s: s.has path type) sets;
          };
      in
      {
        inherit unions;
        union = a: b: unions [
          a
          b
        ];
        difference =
          positive: negative:
          let
            p = coerce positive;
            n = coerce negative;
          in
          {
            paths = p.paths ++ n.paths;
            has = path: type: p.has path type && (type == "directory" || !(n.has path type));
          };
        # nixpkgs passes the predicate a file's name, type and hasExt.
        fileFilter = predicate: root: {
          paths = [ root ];
          has =
            path: type:
            (ofPath root).has path type
            && (
              type == "directory"
              || predicate {
                name = baseNameOf path;
                inherit type;
                hasExt = ext: hasSuffix ".${ext}" (baseNameOf path);
              }
            );
        };
        toSource =
          { root, fileset }:
          let
            set = coerce fileset;
            missing = filter (p: !builtins.pathExists p) set.paths;
          in
          if missing != [ ] then
            throw "lib.fileset.toSource: ${toString (head missing)} does not exist"
          else
            builtins.path {
              path = root;
              name = "source";
              # A flake's source holds no .git, nor what .gitignore names (__pycache__).
              filter =
                path: type:
                !(elem (baseNameOf path) [
                  ".git"
                  "__pycache__"
                ])
                && set.has path type;
            };
      };

    licenses = genAttrs [ "asl20" "bsd3" "unfree" ] (shortName: { inherit shortName; });
    sourceTypes.binaryNativeCode = {
      shortName = "binaryNativeCode";
    };
  };
in
lib
