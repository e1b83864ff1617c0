import { describe, expect, it } from 'vitest';
import { ApiRequestError } from '../../src/partner-api/errors.js';
import { fakePlatformFixture } from '../pull/helpers.js';

/**
 * A success body read for a refusal (spec 4.2 shows no answer): `success: false`, or an error with
 * nothing saying the request was acted on. An error beside an id or `success: true` is no refusal:
 * taken for one, a contact that was created would be sent again at every push.
 */
describe('a success body that may say the request failed', () => {
  const answers: Record<string, unknown> = {
    refused: { success: false, error: 'Unknown event_type' },
    'error alone': { error: 'Unknown event_type' },
    'error beside an id': { id: 'e-1', status: 'queued', error: 'reviewer bounced before' },
    'error beside a nested id': { event: { id: 'e-2' }, error: 'reviewer bounced before' },
    'error beside success': { success: true, error: 'reviewer bounced before' },
    'empty error': { id: 'e-3', error: '' },
  };
  const fx = fakePlatformFixture(({ body }) => ({
    status: 200,
    body: answers[(JSON.parse(body) as { event_type: string }).event_type],
  }));
  const send = (case_: string) =>
    fx.api.events.send({ email: 'a@example.test', event_type: case_ }).then(
      (answer) => answer,
      (error: unknown) => error,
    );

  it('refuses on success false, or an error with nothing acted on beside it', async () => {
    for (const case_ of ['refused', 'error alone']) {
      const error = await send(case_);
      expect(error).toBeInstanceOf(ApiRequestError);
      expect((error as Error).message).toBe('POST /events answered 200: Unknown event_type');
    }
  });

  it('accepts an error beside an id, beside success true, or an empty one', async () => {
    expect(await send('error beside an id')).toEqual({ id: 'e-1', status: 'queued' });
    expect(await send('error beside a nested id')).toEqual({ id: 'e-2', status: null });
    expect(await send('error beside success')).toEqual({ id: null, status: null });
    expect(await send('empty error')).toEqual({ id: 'e-3', status: null });
  });
});
