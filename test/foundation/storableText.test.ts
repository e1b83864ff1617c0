import { describe, expect, it } from 'vitest';
import {
  DEEPER_NOT_KEPT,
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

  it('jsonb: keeps a value nested thousands deep down to MAX_JSON_DEPTH, without overflowing the stack', () => {
    const deep = JSON.parse(`{"x":${'['.repeat(6_000)}1${']'.repeat(6_000)},"y":"kept"}`) as unknown;
    let kept: unknown = JSON.parse(storableJson(deep));
    expect((kept as { y: string }).y).toBe('kept');
    kept = (kept as { x: unknown }).x;
    // The object is level 1, its `x` level 2, …: MAX_JSON_DEPTH levels as sent, then the mark.
    for (let level = 2; level <= MAX_JSON_DEPTH; level++) kept = (kept as unknown[])[0];
    expect(kept).toBe(DEEPER_NOT_KEPT);
    const shallow = { a: [[{ b: 'c' }]] };
    expect(JSON.parse(storableJson(shallow))).toEqual(shallow);
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
