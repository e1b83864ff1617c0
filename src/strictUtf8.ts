// fatal: bytes that are not UTF-8 throw instead of becoming U+FFFD. One leading byte order mark is
// dropped (RFC 8259 §8.1 lets a JSON parser ignore it).
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** `bytes` as text, or undefined when they are not UTF-8: never a text with U+FFFD in their place. */
export function strictUtf8(bytes: Uint8Array): string | undefined {
  try {
    return UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}
