import { describe, expect, it } from 'vitest';
import { copyField } from '../../src/mirror/copyText.js';

describe('copyField', () => {
  it('writes null as \\N and plain text as it is', () => {
    expect(copyField(null)).toBe('\\N');
    expect(copyField('Zoë 👍 "quoted", {braces} NULL')).toBe('Zoë 👍 "quoted", {braces} NULL');
  });

  it('escapes what COPY gives a meaning: backslash, tab, newline, carriage return', () => {
    expect(copyField('a\\b\tc\nd\re')).toBe('a\\\\b\\tc\\nd\\re');
    // The text \N is a backslash and an N, never a null.
    expect(copyField('\\N')).toBe('\\\\N');
  });
});
