import type { NewEvent } from '../../src/push/events/outboxSql.js';

/** An event to enqueue, keyed `key`, to `key@example.com`, carrying its key in its metadata. */
export const newEvent = (key: string, over: Partial<NewEvent> = {}): NewEvent => ({
  key,
  email: `${key}@example.com`,
  contactId: null,
  eventType: 'matter.closed',
  professionalId: null,
  metadata: { key },
  source: 'cli',
  ...over,
});
