import { describe, expect, it } from 'vitest';
import {
  registerResponseSchema,
  splitListed,
  webhookListSchema,
} from '../../src/partner-api/webhooksSchema.js';

const URL = 'https://mirror.example.com/webhooks/review-created';
const SECRET = 'whsec_schema_unsafe_id_1';

/** The first issue of a refused parse, as `path: message`, as ApiSchemaError words it. */
function refusal(result: {
  success: boolean;
  error?: { issues: Array<{ path: PropertyKey[]; message: string }> };
}) {
  expect(result.success).toBe(false);
  const issue = result.error!.issues[0]!;
  return `${issue.path.join('.')}: ${issue.message}`;
}

/**
 * The spec types a webhook's id as text (2.4); a platform sending a number is taken at its word
 * only when JSON.parse read it exactly, or the daemon would delete, or keep, another webhook. A
 * listed one read inexactly is that entry's problem: it is kept without an id, the rest as usual.
 */
describe('a webhook id sent as a JSON number', () => {
  const listOf = (ids: unknown[]) => ids.map((id) => ({ id, url: URL, events: ['review.created'] }));

  it('is taken as text when it is a safe integer', () => {
    const body = JSON.parse(`[{"id":42,"url":"${URL}"},{"id":9007199254740991},{"id":-7},{"id":"wh_1"}]`);
    expect(webhookListSchema.parse(body).map((w) => w.id)).toEqual(['42', '9007199254740991', '-7', 'wh_1']);
    expect(registerResponseSchema.parse({ webhook: { id: 42, signing_secret: SECRET } }).id).toBe('42');
  });

  it('keeps an entry past 2^53 without an id, with its place and why, and the rest of the list as usual', () => {
    // As the HTTP client reads it: 9007199254740993 becomes 9007199254740992.
    const body = JSON.parse(
      `{"webhooks":[{"id":"wh_1","url":"${URL}"},{"id":9007199254740993,"url":"${URL}","is_active":false,"last_error":"HTTP 500"}]}`,
    );
    expect(body.webhooks[1].id).toBe(9007199254740992);
    const listed = webhookListSchema.parse(body);
    expect(listed).toEqual([
      { id: 'wh_1', url: URL, events: [], last_error: null },
      {
        position: 1,
        idProblem: 'is a number past 2^53 (read as 9007199254740992), which JSON cannot carry exactly',
        url: URL,
        events: [],
        is_active: false,
        last_error: 'HTTP 500',
      },
    ]);
    // No id at all, not the one as read: nothing can name another webhook by it.
    expect('id' in listed[1]!).toBe(false);
    expect(splitListed(listed)).toEqual({ named: [listed[0]], inexact: [listed[1]] });
    expect(webhookListSchema.parse(body.webhooks)).toEqual(listed);
  });

  it('keeps without an id every number JSON may not have read exactly', () => {
    for (const id of [2 ** 53, -(2 ** 53), 1e21, 1.5, Number.MAX_VALUE]) {
      const listed = webhookListSchema.parse(listOf(['wh_1', id]));
      expect(listed.map((w) => w.id)).toEqual(['wh_1', undefined]);
      expect(listed[1]).toMatchObject({ position: 1, idProblem: expect.stringMatching(/^is a number /) });
    }
    expect(webhookListSchema.parse(listOf([1.5]))[0]).toMatchObject({
      position: 0,
      idProblem: expect.stringMatching(/^is a number that is not a whole number \(read as 1\.5\)/),
    });
  });

  it('still refuses the list for an id that is no number and no indexable text', () => {
    expect(refusal(webhookListSchema.safeParse(listOf(['wh_1', ''])))).toMatch(/^webhooks\.1\.id: /);
    expect(refusal(webhookListSchema.safeParse([{ url: URL }]))).toMatch(/^webhooks\.0\.id: /);
  });

  it('refuses a registration answer past 2^53, in either shape, without its secret', () => {
    const bodies = [
      `{"webhook":{"id":9007199254740993,"url":"${URL}","signing_secret":"${SECRET}"}}`,
      `{"id":9007199254740993,"url":"${URL}","signing_secret":"${SECRET}"}`,
    ];
    for (const [i, text] of bodies.entries()) {
      const result = registerResponseSchema.safeParse(JSON.parse(text));
      const reason = refusal(result);
      expect(reason).toMatch(
        new RegExp(
          `^${i === 0 ? 'webhook\\.' : ''}id: is a number past 2\\^53 \\(read as 9007199254740992\\).*its secret is not stored and it is not deleted again: delete it by hand`,
        ),
      );
      expect(JSON.stringify(result.error!.issues)).not.toContain(SECRET);
    }
  });
});
