import { describe, expect, it } from 'vitest';
import {
  MAX_JSON_DEPTH,
  storableJson,
  storableText,
  TOO_DEEP,
  unstorableReason,
  unstorableReasonIn,
} from '../../src/db/storableText.js';

describe('what PostgreSQL can store', () => {
  it('text: U+0000 becomes U+FFFD, everything else stays', () => {
    expect(storableText('a\u0000b\u0000')).toBe('a\uFFFDb\uFFFD');
    expect(storableText('Zoë 👍')).toBe('Zoë 👍');
    expect(storableText(null)).toBeNull();
  });

  it('jsonb: U+0000 and half characters become U+FFFD in strings and keys; escapes as text stay text', () => {
    const raw = { 'k\u0000': ['cut \ud83d', 'ok 👍', '\udc4d alone'], literal: '\\u0000 and \\ud83d', n: 1 };
    expect(JSON.parse(storableJson(raw))).toEqual({
      'k\uFFFD': ['cut \uFFFD', 'ok 👍', '\uFFFD alone'],
      literal: '\\u0000 and \\ud83d',
      n: 1,
    });
    expect(storableJson(undefined)).toBe('null');
  });

  it('says why a value cannot be stored as given, or nothing', () => {
    expect(unstorableReason('a\u0000')).toMatch(/NUL character/);
    expect(unstorableReason('cut \ud83d')).toMatch(/lone UTF-16 surrogate/);
    expect(unstorableReason('\udc4d')).toMatch(/lone UTF-16 surrogate/);
    expect(unstorableReason('ok 👍 twice 👍')).toBeUndefined();
  });

  it('says a JSON value nested too deep is refused, without overflowing the stack however deep', () => {
    const nested = (depth: number): unknown => {
      let value: unknown = 'leaf';
      for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value] : { k: value };
      return value;
    };
    expect(MAX_JSON_DEPTH).toBe(100);
    expect(unstorableReasonIn(nested(100))).toBeUndefined();
    expect(unstorableReasonIn(nested(101))).toBe(TOO_DEEP);
    expect(unstorableReasonIn(nested(6_000))).toBe(TOO_DEEP);
    expect(unstorableReasonIn(JSON.parse(`{"x":${'['.repeat(6_000)}${']'.repeat(6_000)}}`))).toBe(TOO_DEEP);
    // The first reason in the text, as the recursive walk found it.
    expect(unstorableReasonIn({ a: ['ok', { 'k\u0000': 1 }], b: 'cut \ud83d' })).toMatch(/NUL character/);
    expect(unstorableReasonIn({ a: 1, b: ['x', 'cut \ud83d'] })).toMatch(/lone UTF-16 surrogate/);
  });
});
