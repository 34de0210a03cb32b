// `--secret-key`: hex or NIP-19 `nsec`, decoded here into the 32 bytes the wasm `Signer`
// takes (the key lives inside the wasm from then on; the bytes here are zeroed).
import { Signer } from "../wasm.js";

const BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
const GENERATOR = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

/** The 32 bytes of an `nsec1...` key; the bech32 checksum is verified. */
function nsec(text: string): Uint8Array {
  const lower = text.toLowerCase();
  if (lower !== text && text.toUpperCase() !== text) throw new Error("mixed case");
  const split = lower.lastIndexOf("1");
  const hrp = lower.slice(0, split);
  const data = lower.slice(split + 1);
  if (hrp !== "nsec") throw new Error("not an nsec key");
  const values: number[] = [];
  for (const c of data) {
    const v = BECH32.indexOf(c);
    if (v < 0) throw new Error(`invalid character ${JSON.stringify(c)}`);
    values.push(v);
  }
  if (values.length < 7) throw new Error("too short");
  let check = 1;
  // The human-readable part is ASCII (checked above): its code units are its characters.
  const codes = Array.from({ length: hrp.length }, (_, i) => hrp.charCodeAt(i));
  const expanded = [...codes.map((c) => c >> 5), 0, ...codes.map((c) => c & 31), ...values];
  for (const v of expanded) {
    const top = check >>> 25;
    check = (((check & 0x1ffffff) << 5) ^ v) >>> 0;
    for (let i = 0; i < 5; i += 1) {
      if ((top >>> i) & 1) check = (check ^ (GENERATOR[i] ?? 0)) >>> 0;
    }
  }
  if (check !== 1) throw new Error("invalid checksum");
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const v of values.slice(0, -6)) {
    acc = ((acc << 5) | v) & 0xfff;
    bits += 5;
    while (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
    }
  }
  values.fill(0);
  if (out.length !== 32) throw new Error("an nsec key holds 32 bytes");
  const key = Uint8Array.from(out);
  out.fill(0);
  return key;
}

function hex(text: string): Uint8Array {
  if (!/^[0-9a-fA-F]{64}$/.test(text)) throw new Error("expected 64 hex characters");
  return Uint8Array.from(Buffer.from(text, "hex"));
}

/**
 * The NIP-42 signer of `--secret-key` (hex or `nsec`). Throws an `Error` whose message is the
 * usage line (`--secret-key is not a secret key: ...`).
 */
export function parseSecretKey(text: string): Signer {
  const trimmed = text.trim();
  let key: Uint8Array;
  try {
    key = /^nsec1/i.test(trimmed) ? nsec(trimmed) : hex(trimmed);
  } catch (error) {
    throw new Error(`--secret-key is not a secret key: ${(error as Error).message}`);
  }
  try {
    return new Signer(key);
  } catch (error) {
    throw new Error(`--secret-key is not a secret key: ${(error as Error).message}`);
  } finally {
    key.fill(0);
  }
}
