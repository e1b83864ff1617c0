import { z } from 'zod';

/** The `pagination` object of every list (spec 4.3), shared by the resource schemas. */
export const paginationSchema = z.object({
  count: z.number().int().nonnegative(),
  has_more: z.boolean(),
  next_cursor: z.string().min(1).nullable(),
});
export type Pagination = z.infer<typeof paginationSchema>;
