# A hex sha256, as PyPI and Arm publish it and pins.toml keeps it, as the SRI hash nixpkgs
# writes (`hash = "sha256-<base64>"`). Plain Nix: builtins.convertHash needs Nix 2.19.
hex:
let
  inherit (builtins) substring stringLength genList concatStringsSep;
  alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  hexDigits = {
    "0" = 0; "1" = 1; "2" = 2; "3" = 3; "4" = 4; "5" = 5; "6" = 6; "7" = 7;
    "8" = 8; "9" = 9; "a" = 10; "b" = 11; "c" = 12; "d" = 13; "e" = 14; "f" = 15;
  };
  digit =
    i:
    let
      c = substring i 1 hex;
    in
    hexDigits.${c} or (throw "not a hex sha256 (lower case, 64 digits): ${hex}");
  bytes = stringLength hex / 2;
  byte = i: if i < bytes then 16 * digit (2 * i) + digit (2 * i + 1) else 0;
  mod = a: b: a - a / b * b;
  sextet = v: substring v 1 alphabet;
  # Three bytes to four characters, "=" for the bytes past the end.
  group =
    g:
    let
      v = byte (3 * g) * 65536 + byte (3 * g + 1) * 256 + byte (3 * g + 2);
    in
    sextet (v / 262144)
    + sextet (mod (v / 4096) 64)
    + (if 3 * g + 1 < bytes then sextet (mod (v / 64) 64) else "=")
    + (if 3 * g + 2 < bytes then sextet (mod v 64) else "=");
in
assert stringLength hex == 64 || throw "not a hex sha256 (64 digits): ${hex}";
"sha256-" + concatStringsSep "" (genList group ((bytes + 2) / 3))
