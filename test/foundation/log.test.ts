import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { makeLogger, SecretScrubber } from '../../src/log.js';

function collect(): { stream: Writable; lines: () => string } {
  let out = '';
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      out += chunk.toString();
      callback();
    },
  });
  return { stream, lines: () => out };
}

describe('the logger', () => {
  it('redacts secret fields by path and secret values anywhere', () => {
    const sink = collect();
    const scrubber = new SecretScrubber(['key-live-0123456789']);
    const log = makeLogger({ level: 'info', scrubber, destination: sink.stream });
    log.info(
      { headers: { 'x-api-key': 'key-live-0123456789' }, signing_secret: 'whsec_abc' },
      'request sent',
    );
    log.error({ err: new Error('upstream said: bad key key-live-0123456789') }, 'request failed');
    scrubber.add('whsec_learned_later');
    log.warn({ detail: { nested: 'value whsec_learned_later here' } }, 'secret learned at run time');

    const out = sink.lines();
    expect(out).not.toContain('key-live-0123456789');
    expect(out).not.toContain('whsec_abc');
    expect(out).not.toContain('whsec_learned_later');
    const [first, second, third] = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(first).toMatchObject({
      level: 'info',
      msg: 'request sent',
      service: 'review-mirror',
      headers: { 'x-api-key': '[REDACTED]' },
      signing_secret: '[REDACTED]',
    });
    expect(second.err.message).toBe('upstream said: bad key [REDACTED]');
    expect(third.detail.nested).toBe('value [REDACTED] here');
  });

  it('ignores values too short to be secrets, which would scrub ordinary words', () => {
    const scrubber = new SecretScrubber(['abc']);
    expect(scrubber.scrub('abc def')).toBe('abc def');
  });
});
