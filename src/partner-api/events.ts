import { z } from 'zod';
import { EventBodyError } from './errors.js';
import { answerText, type HttpClient } from './http.js';

/** An event as sent (spec 4.2): to a contact by email or by the platform's contact id. */
export interface EventBody {
  readonly email?: string | undefined;
  readonly contact_id?: string | undefined;
  readonly event_type: string;
  readonly professional_id?: string | undefined;
  readonly metadata?: Record<string, unknown> | undefined;
}

// Spec 4.2: "Response body and status codes: not shown". Any 2xx is taken as accepted, whatever
// its body, unless it says the event was refused (`{"success": false, "error": …}`), which fails
// it with the platform's text; an id and a status are kept when they can be found.
const acceptedSchema = z.unknown().transform((body) => {
  const record = (body ?? {}) as {
    id?: unknown;
    status?: unknown;
    event?: { id?: unknown; status?: unknown };
  };
  const id = record.id ?? record.event?.id;
  const status = record.status ?? record.event?.status;
  return {
    id: answerText(id),
    status: typeof status === 'string' ? answerText(status) : null,
  };
});

export interface EventsApi {
  /**
   * Posts one lifecycle event. The platform has no idempotency key for events: a lost answer is
   * never retried here (only 429s and failures to connect are); the outbox decides.
   */
  send(event: EventBody, signal?: AbortSignal): Promise<{ id: string | null; status: string | null }>;
}

export function makeEventsApi(http: HttpClient): EventsApi {
  return {
    send: async (event, signal) => {
      const body = Object.fromEntries(Object.entries(event).filter(([, v]) => v !== undefined && v !== null));
      // Written once here as the client will write it: a failure inside the client, with no answer,
      // would read as a request that may have reached the platform.
      try {
        JSON.stringify(body);
      } catch (cause) {
        const why = `POST /events not sent: its body cannot be written as JSON (${String(cause)})`;
        throw new EventBodyError(why, { cause });
      }
      return http.request('POST', '/events', {
        body,
        schema: acceptedSchema,
        refusalInBody: true,
        idempotent: false,
        signal,
      });
    },
  };
}
