import { parse as parseCron } from 'node-cron';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/schema.js';

/** The message parseConfig throws for `env`, or undefined when it takes it. */
function refusal(env: Record<string, string>): string | undefined {
  try {
    parseConfig(env);
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
}

const CRON_VARIABLES = [
  'SYNC_REVIEWS_CRON',
  'SYNC_DIRECTORY_CRON',
  'SYNC_RECONCILE_CRON',
  'CRM_INBOX_CRON',
  'WEBHOOK_HEALTH_CRON',
] as const;

describe('cron expressions with a backwards range', () => {
  // node-cron takes each as a wrap-around: `1-0` ran every minute, `5-2` Friday to Tuesday.
  it.each([
    [
      '1-0 * * * *',
      'minute field: 1-0 starts after it ends, so node-cron would wrap it around to 1-59,0; write it from its lower end to its higher, or write 1-59,0 if that is what you meant',
    ],
    [
      '* * * * 5-2',
      'day-of-week field: 5-2 starts after it ends, so node-cron would wrap it around to 5-6,0-2; write it from its lower end to its higher, or write 5-6,0-2 if that is what you meant',
    ],
    [
      '0 9 * * fri-mon',
      'day-of-week field: fri-mon (5-1) starts after it ends, so node-cron would wrap it around to 5-6,0-1; write it from its lower end to its higher, or write 5-6,0-1 if that is what you meant',
    ],
    [
      '0 9 * * sat-sun',
      'day-of-week field: sat-sun (6-0) starts after it ends, so node-cron would wrap it around to 6-7 (Sunday is 7 as well as 0); write it from its lower end to its higher, or write 6-7 if that is what you meant',
    ],
    [
      '0 9 * * 7-1',
      'day-of-week field: 7-1 starts after it ends, so node-cron would wrap it around to 0-1; write it from its lower end to its higher, or write 0-1 if that is what you meant',
    ],
    [
      '0 0 1 Dec-FEB *',
      'month field: Dec-FEB (12-2) starts after it ends, so node-cron would wrap it around to 12,1-2; write it from its lower end to its higher, or write 12,1-2 if that is what you meant',
    ],
    [
      '0 23-1 * * *',
      'hour field: 23-1 starts after it ends, so node-cron would wrap it around to 23,0-1; write it from its lower end to its higher, or write 23,0-1 if that is what you meant',
    ],
    [
      '0 0 31-1 * *',
      'day-of-month field: 31-1 starts after it ends, so node-cron would wrap it around to 31,1; write it from its lower end to its higher, or write 31,1 if that is what you meant',
    ],
    [
      '50-10/15 * * * *',
      'minute field: 50-10/15 starts after it ends, so node-cron would wrap it around to 50,5; write it from its lower end to its higher, or write 50,5 if that is what you meant',
    ],
    // In a list, and in the seconds of a six-field expression.
    [
      '0,30-10 * * * * *',
      'second field: 30-10 starts after it ends, so node-cron would wrap it around to 30-59,0-10; write it from its lower end to its higher, or write 30-59,0-10 if that is what you meant',
    ],
    // Past the field's values: node-cron's wrap-around made it 5-10.
    [
      '65-10 * * * *',
      'minute field: 65-10 starts after it ends, at 65, past the highest minute (59); write it from its lower end to its higher, within 0-59',
    ],
  ])('refuses "%s", saying which field and which range', (expression, problem) => {
    for (const variable of CRON_VARIABLES) {
      expect(refusal({ [variable]: expression })).toBe(
        `invalid configuration: ${variable} ("${expression}") has a backwards range in its ${problem}`,
      );
    }
  });

  it.each([
    '*/5 * * * *',
    '1-10/2 * * * *',
    '1,3-5 * * * *',
    '5-5 * * * *',
    '0-59 0-23 1-31 1-12 0-6',
    '0 9 * * mon-fri',
    '0 9 * * MON-Fri',
    '0 9 * * monday-friday',
    '0 0 1 jan-mar *',
    '0 0 1 JUNE-dec *',
    // Day of week 7 is Sunday as well: these run forwards, to the end of the week.
    '0 9 * * 5-7',
    '0 9 * * fri-7',
    '0 9 * * 0-7',
    '0 9 * * SUN-SAT',
    '*/10 0-30 8-17 * * 1-5',
    '0 0 L-3 * *',
    '0 0 * * 1#2',
    '@daily',
  ])('takes "%s"', (expression) => {
    expect(refusal({ SYNC_REVIEWS_CRON: expression })).toBeUndefined();
  });

  it('still refuses a schedule that never runs, and an expression node-cron refuses', () => {
    expect(refusal({ SYNC_REVIEWS_CRON: '0 0 1-7 * 1#2' })).toMatch(/matches no time/);
    expect(refusal({ SYNC_REVIEWS_CRON: '* * * * 1-5/0' })).toBe(
      'invalid configuration: SYNC_REVIEWS_CRON must be a cron expression (e.g. "*/5 * * * *") or "off"',
    );
  });

  // The replacement offered is what node-cron would have run, and is itself taken: every backwards
  // range of every field, in steps of 1, 2 and 7, against node-cron's own reading.
  it('offers, for every backwards range, what node-cron would run instead', () => {
    const fields = [
      { at: 0, key: 'second', min: 0, max: 59 },
      { at: 1, key: 'minute', min: 0, max: 59 },
      { at: 2, key: 'hour', min: 0, max: 23 },
      { at: 3, key: 'dayOfMonth', min: 1, max: 31 },
      { at: 4, key: 'month', min: 1, max: 12 },
      { at: 5, key: 'dayOfWeek', min: 0, max: 7 },
    ] as const;
    const expressionWith = (at: number, text: string) =>
      ['0', '0', '0', '*', '*', '*'].map((f, i) => (i === at ? text : f)).join(' ');
    const values = (expression: string, key: (typeof fields)[number]['key']) =>
      [...new Set(parseCron(expression)[key])].sort();
    // The other schedules off: each one that runs costs a search for its next run.
    const others = Object.fromEntries(CRON_VARIABLES.slice(1).map((variable) => [variable, 'off']));
    const offered = new Set<string>();
    let ranges = 0;
    for (const field of fields) {
      for (let first = field.min; first <= field.max; first++) {
        for (let last = field.min; last < first; last++) {
          for (const step of [1, 2, 7]) {
            const range = step === 1 ? `${first}-${last}` : `${first}-${last}/${step}`;
            const expression = expressionWith(field.at, range);
            const message = refusal({ ...others, SYNC_REVIEWS_CRON: expression });
            const hint = /or write (\S+) if that is what you meant$/.exec(message ?? '')?.[1];
            expect(hint, `${expression}: ${message}`).toBeDefined();
            expect(values(expressionWith(field.at, hint!), field.key), expression).toEqual(
              values(expression, field.key),
            );
            offered.add(expressionWith(field.at, hint!));
            ranges++;
          }
        }
      }
    }
    expect(ranges).toBeGreaterThan(10_000);
    // Each replacement is forwards, so taken (a sample: each parse asks node-cron for a next run).
    const sample = [...offered].filter((_, i) => i % 50 === 0);
    for (const expression of sample) {
      expect(refusal({ ...others, SYNC_REVIEWS_CRON: expression }), expression).toBeUndefined();
    }
  });
});

describe('WEBHOOK_TOLERANCE_SECONDS', () => {
  const TOO_SMALL =
    "invalid configuration: WEBHOOK_TOLERANCE_SECONDS must be at least 5: a delivery's timestamp is in whole seconds and is checked once its body has arrived, so even a healthy platform's deliveries are a second or two old here, with both clocks kept by NTP, and less would refuse them (401 stale_timestamp); the platform recommends 300";

  it.each(['0', '0.5', '1', '4.9', '-1'])('refuses %s, saying why', (value) => {
    expect(refusal({ WEBHOOK_TOLERANCE_SECONDS: value })).toBe(TOO_SMALL);
  });

  it('takes 5 and more, up to what a timer can wait, and defaults to 300', () => {
    expect(parseConfig({}).webhook.toleranceSeconds).toBe(300);
    expect(parseConfig({ WEBHOOK_TOLERANCE_SECONDS: '5' }).webhook.toleranceSeconds).toBe(5);
    expect(parseConfig({ WEBHOOK_TOLERANCE_SECONDS: '7.5' }).webhook.toleranceSeconds).toBe(7.5);
    expect(parseConfig({ WEBHOOK_TOLERANCE_SECONDS: '2147483' }).webhook.toleranceSeconds).toBe(2_147_483);
    expect(refusal({ WEBHOOK_TOLERANCE_SECONDS: '2147484' })).toBe(
      'invalid configuration: WEBHOOK_TOLERANCE_SECONDS must be at most 2147483',
    );
    expect(refusal({ WEBHOOK_TOLERANCE_SECONDS: 'soon' })).toBe(
      'invalid configuration: WEBHOOK_TOLERANCE_SECONDS must be a number of seconds',
    );
  });
});

describe('DB_SCHEMA', () => {
  // PostgreSQL refuses a NOTIFY channel name past 63 bytes, and the outbox's is `<schema>_events_outbox`.
  it('refuses a name the outbox channel could not be named after, and takes one of 49 characters', () => {
    expect(refusal({ DB_SCHEMA: 'a'.repeat(50) })).toContain(
      'DB_SCHEMA must be at most 49 characters: the events outbox',
    );
    expect(parseConfig({ DB_SCHEMA: 'a'.repeat(49) }).db.schema).toBe('a'.repeat(49));
  });
});
