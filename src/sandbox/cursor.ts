import { z } from 'zod';

/**
 * Opaque cursors: base64url JSON of a keyset position, never an offset, so rows inserted between
 * requests cannot shift a page. Each cursor also carries the filter it was issued under (`since`
 * for reviews, `active` for lists) so a replayed cursor stays well-defined.
 */

const reviewCursorSchema = z.strictObject({
  v: z.literal(1),
  k: z.literal('reviews'),
  /** created_at (ms) and id of the last review returned. */
  t: z.number().int(),
  id: z.string().min(1).max(64),
  /** The walk's `since` (ms), or null. */
  s: z.number().int().nullable(),
  /** Only under the identicalPagesAfterPages fault: tells apart cursors naming the same position. */
  r: z.number().int().nonnegative().optional(),
});

const listCursorSchema = z.strictObject({
  v: z.literal(1),
  k: z.enum(['locations', 'professionals']),
  /** Sequence number of the last item returned (lists are in creation order). */
  n: z.number().int().nonnegative(),
  /** The `active` filter the walk was started with. */
  a: z.boolean(),
});

export type ReviewCursor = z.infer<typeof reviewCursorSchema>;
export type ListCursor = z.infer<typeof listCursorSchema>;

export class CursorError extends Error {
  override readonly name = 'CursorError';
}

const encode = (value: object): string => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');

function decode<T>(cursor: string, schema: z.ZodType<T>): T {
  if (cursor.length === 0 || cursor.length > 512 || !/^[A-Za-z0-9_-]+$/.test(cursor)) {
    throw new CursorError('invalid cursor');
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new CursorError('invalid cursor');
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new CursorError('invalid cursor');
  return parsed.data;
}

export const encodeReviewCursor = (
  position: { createdMs: number; id: string },
  sinceMs: number | null,
  repeat?: number,
) =>
  encode({
    v: 1,
    k: 'reviews',
    t: position.createdMs,
    id: position.id,
    s: sinceMs,
    ...(repeat === undefined ? {} : { r: repeat }),
  } satisfies ReviewCursor);

export const decodeReviewCursor = (cursor: string): ReviewCursor => decode(cursor, reviewCursorSchema);

export const encodeListCursor = (kind: ListCursor['k'], seq: number, active: boolean) =>
  encode({ v: 1, k: kind, n: seq, a: active } satisfies ListCursor);

export function decodeListCursor(cursor: string, kind: ListCursor['k']): ListCursor {
  const decoded = decode(cursor, listCursorSchema);
  if (decoded.k !== kind) throw new CursorError(`cursor was not issued by the ${kind} list`);
  return decoded;
}
