import { describe, expect, it } from 'vitest';
import { ApiRequestError, ApiUnavailableError } from '../../src/partner-api/errors.js';
import { createOnce } from '../../src/push/provision/createOnce.js';

const retry = { maxRetries: 3, budgetMs: 10_000, baseDelayMs: 1, maxDelayMs: 1 };
const notSent = () =>
  new ApiUnavailableError('POST /x could not connect', { route: 'POST /x', outcomeUnknown: false });
const lostAnswer = () => new ApiUnavailableError('POST /x timed out', { route: 'POST /x' });
const badGateway = () => new ApiUnavailableError('POST /x answered 502', { route: 'POST /x', status: 502 });
const taken = () =>
  new ApiRequestError('A user with this email already exists', { route: 'POST /x', status: 409 });

/** A create answering `failures` in turn, then the record; and a lookup answering `found` in turn. */
function scripted(failures: Error[], found: Array<string | undefined | Error>, duplicateRefused: boolean) {
  const calls = { creates: 0, finds: 0 };
  const create = async () => {
    const failure = failures[calls.creates++];
    if (failure !== undefined) throw failure;
    return 'made';
  };
  const find = async () => {
    const answer = found[calls.finds++];
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { calls, run: () => createOnce(create, { find, duplicateRefused }, { retry, random: () => 0 }) };
}

/** When a create is sent again, and when its record is looked for instead (decisions only). */
describe('createOnce', () => {
  it('throws, without looking or sending it again, the failure of a create that never left (the transport retried it)', async () => {
    const { calls, run } = scripted([notSent()], [], false);
    await expect(run()).rejects.toThrow('POST /x could not connect');
    expect(calls).toEqual({ creates: 1, finds: 0 });
  });

  it('does not send again a location create whose answer was lost, found nowhere', async () => {
    const { calls, run } = scripted([badGateway()], [undefined], false);
    const outcome = await run();
    expect(outcome).toEqual({
      error: expect.stringMatching(/^the create's answer was lost \(POST \/x answered 502\), and no record/),
    });
    expect(calls).toEqual({ creates: 1, finds: 1 });
  });

  it('takes the record found after a lost answer as created', async () => {
    const { calls, run } = scripted([lostAnswer()], ['found'], false);
    expect(await run()).toEqual({ record: 'found', created: true });
    expect(calls).toEqual({ creates: 1, finds: 1 });
  });

  it('sends again a create the platform refuses to double, and looks for it again when then refused', async () => {
    const { calls, run } = scripted([lostAnswer(), taken()], [undefined, 'found'], true);
    expect(await run()).toEqual({ record: 'found', created: true });
    expect(calls).toEqual({ creates: 2, finds: 2 });
  });

  it('says a refusal after a lost answer may be its own record when still not found', async () => {
    const { run } = scripted([lostAnswer(), taken()], [undefined, undefined], true);
    expect(await run()).toEqual({
      error: expect.stringMatching(
        /^A user with this email already exists, after an earlier create's answer was lost \(POST \/x timed out\): that create may have made it/,
      ),
      status: 409,
    });
  });

  it('does not send again a create whose record cannot be looked for, and says so', async () => {
    const listingDown = new ApiUnavailableError('GET /x answered 500', { route: 'GET /x', status: 500 });
    const { calls, run } = scripted([lostAnswer(), taken()], [undefined, listingDown], true);
    expect(await run()).toEqual({
      error:
        "the create's answer was lost (POST /x timed out) and looking for its record failed (GET /x answered 500); not sent again: the next run finds it if it was created",
    });
    expect(calls).toEqual({ creates: 2, finds: 2 });
  });

  it('reports a refusal with no earlier loss as the platform worded it, without looking', async () => {
    const { calls, run } = scripted([taken()], [], true);
    expect(await run()).toEqual({ error: 'A user with this email already exists', status: 409 });
    expect(calls.finds).toBe(0);
  });
});
