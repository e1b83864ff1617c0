import { z } from 'zod';

/** Timestamps of every resource (spec 2): ISO 8601 with an offset. */
export const isoTimestamp = z.iso.datetime({ offset: true, message: 'must be an ISO 8601 timestamp' });
