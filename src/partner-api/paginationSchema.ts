import { z } from 'zod';

/**
 * The `pagination` object of every list (spec 2.6), shared by the resource schemas. Lenient where
 * a platform plausibly differs from the spec's table without meaning anything else:
 * - `next_cursor` null, `""` or absent all mean "no cursor" (a Go or PHP platform may send the
 *   zero value, or drop the key, on the last page); continuationOf (paginate.ts) reads the three
 *   alike, and a page that claims more without a usable cursor still fails the walk;
 * - `count` absent or null: the page is taken without it (its only use is a consistency check,
 *   pageOf in paginate.ts).
 * `has_more` stays required: without it nothing says whether the walk is over, and an end taken
 * by mistake would let a reconcile mark the unread records removed.
 */
export const paginationSchema = z.object({
  count: z.number().int().nonnegative().nullish(),
  has_more: z.boolean(),
  next_cursor: z.string().nullish(),
});
export type Pagination = z.infer<typeof paginationSchema>;

/**
 * The records of a listing (`reviews`, `locations`, `professionals`): an array, each record
 * checked on its own later (validRecords.ts). `null` is read as no records: Go marshals an empty
 * (nil) slice as `null`. Anything else that is not an array (a string, an object) is refused.
 */
export const pageRecords = z
  .array(z.unknown())
  .nullable()
  .transform((records) => records ?? []);
