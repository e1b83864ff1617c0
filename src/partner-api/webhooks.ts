import { z } from 'zod';
import type { HttpClient } from './http.js';
import {
  type ListedWebhook,
  REVIEW_CREATED_EVENT,
  type RegisteredWebhook,
  registerResponseSchema,
  webhookListSchema,
} from './webhooksSchema.js';

export interface WebhooksApi {
  /** Registers `url` for review.created; the response is the only time the signing secret is shown. */
  register(
    input: { url: string; description?: string | undefined },
    signal?: AbortSignal,
  ): Promise<RegisteredWebhook>;
  /** Every webhook of the company, in the platform's order; one whose id was read inexactly has none. */
  list(signal?: AbortSignal): Promise<ListedWebhook[]>;
  /** Throws ApiRequestError when the platform refuses, with an error status or in a 2xx body. */
  delete(id: string, signal?: AbortSignal): Promise<void>;
}

export function makeWebhooksApi(http: HttpClient): WebhooksApi {
  return {
    register: (input, signal) =>
      http.request('POST', '/webhook', {
        body: {
          url: input.url,
          events: [REVIEW_CREATED_EVENT],
          ...(input.description === undefined ? {} : { description: input.description }),
        },
        schema: registerResponseSchema,
        signal,
      }),
    list: (signal) => http.request('GET', '/webhook', { schema: webhookListSchema, signal }),
    delete: async (id, signal) => {
      await http.request('DELETE', '/webhook', {
        query: { id },
        route: 'DELETE /webhook?id=:id',
        schema: z.unknown(),
        // Spec 4.6: the delete's "response body and status: not shown". A webhook taken for
        // deleted stops having its secret accepted while the platform may still deliver with it.
        refusalInBody: true,
        signal,
      });
    },
  };
}
