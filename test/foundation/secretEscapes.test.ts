import { describe, expect, it } from 'vitest';
import { SecretScrubber } from '../../src/log.js';

const hex = (c: string) => c.charCodeAt(0).toString(16).padStart(4, '0');
/** Each UTF-16 unit of `text` as `\uXXXX`, as JSON allows for any character. */
const unicodeEscaped = (text: string, upper = false) =>
  text.replace(/[\s\S]/g, (c) => `\\u${upper ? hex(c).toUpperCase() : hex(c)}`);

/** The text JSON.parse would read back, after scrubbing a document that held `escaped`. */
const scrubbedJson = (secret: string, escaped: string) =>
  JSON.parse(new SecretScrubber([secret]).scrub(`{"said":"bad \\"${escaped}\\"\\n, see /docs"}`)).said;

/** The escape matching alone, without servers: every JSON escaping of a secret is scrubbed. */
describe('SecretScrubber and JSON escapes', () => {
  const SECRET = 'rm_live_é<a&b>/k3y';

  it('scrubs the secret raw, URL-encoded, and in the forms of the common encoders', () => {
    const scrubber = new SecretScrubber([SECRET]);
    for (const form of [SECRET, encodeURIComponent(SECRET), JSON.stringify(SECRET).slice(1, -1)]) {
      expect(scrubber.scrub(`key ${form}!`)).toBe('key [REDACTED]!');
    }
    // PHP with JSON_HEX_TAG | JSON_HEX_AMP: "/" as "\/", HTML in capitals, non-ASCII in small letters.
    expect(scrubbedJson(SECRET, 'rm_live_\\u00e9\\u003Ca\\u0026b\\u003E\\/k3y')).toBe(
      'bad "[REDACTED]"\n, see /docs',
    );
  });

  it('scrubs any mix of escapes: every character as \\uXXXX in either case, or only some', () => {
    for (const escaped of [
      unicodeEscaped(SECRET),
      unicodeEscaped(SECRET, true),
      `${unicodeEscaped('rm_l')}ive_\u00e9<a\\u0026b>\\/\\u006B3y`,
    ]) {
      expect(scrubbedJson(SECRET, escaped)).toBe('bad "[REDACTED]"\n, see /docs');
    }
  });

  it('scrubs characters outside the BMP, written as surrogate pairs', () => {
    const astral = 'whsec_😀_emoji';
    expect(scrubbedJson(astral, 'whsec_\\ud83d\\uDE00_emoji')).toBe('bad "[REDACTED]"\n, see /docs');
    expect(scrubbedJson(astral, JSON.stringify(astral).slice(1, -1))).toBe('bad "[REDACTED]"\n, see /docs');
  });

  it('scrubs the characters JSON must escape in each of their forms, and raw outside JSON', () => {
    const odd = 'sec"ret\\with\ttab\u0001';
    for (const escaped of [
      JSON.stringify(odd).slice(1, -1),
      'sec\\u0022ret\\u005Cwith\\u0009tab\\u0001',
      'sec\\"ret\\\\with\\ttab\\u0001',
    ]) {
      expect(scrubbedJson(odd, escaped)).toBe('bad "[REDACTED]"\n, see /docs');
    }
    expect(new SecretScrubber([odd]).scrub(`<p>${odd}</p>`)).toBe('<p>[REDACTED]</p>');
  });

  it('leaves the JSON valid when what looks like the secret begins inside an escape', () => {
    const scrubber = new SecretScrubber(['Abcdef12']);
    // An escaped backslash, then the secret escaped once more: the escape goes with the secret.
    expect(JSON.parse(scrubber.scrub('["\\\\u0041bcdef12", "x\\\\\\\\Abcdef12"]'))).toEqual([
      '[REDACTED]',
      'x\\\\[REDACTED]',
    ]);
    expect(JSON.parse(new SecretScrubber(['nabcdef']).scrub('"a\\nabcdef"'))).toBe('a[REDACTED]');
  });

  it('scrubs the longer of two secrets that begin alike whole, and several in one text', () => {
    const scrubber = new SecretScrubber(['whsec_abcdef', 'whsec_abcdef_rotated']);
    scrubber.add('rm_live_key_2');
    expect(scrubber.scrub('whsec_abcdef_rotated, whsec_\\u0061bcdef; rm_live_key_2')).toBe(
      '[REDACTED], [REDACTED]; [REDACTED]',
    );
  });

  it('leaves text without a secret as it was', () => {
    const text = '{"comment":"caf\\u00e9 \\"ok\\" \\\\ \\/ rm_live_"}';
    expect(new SecretScrubber([SECRET]).scrub(text)).toBe(text);
    expect(new SecretScrubber().scrub(text)).toBe(text);
  });
});
