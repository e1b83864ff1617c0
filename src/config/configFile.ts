import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { z } from 'zod';
import { RULE_METADATA_KEYS } from '../push/events/contactRules.js';
import { ConfigError } from './schema.js';

/**
 * The optional configuration file (`REVIEW_MIRROR_CONFIG`, or `--mapping`): how a CRM export maps
 * to the platform's contact fields. YAML or JSON (JSON is YAML), validated once at start-up with
 * errors naming the key. Without a file the defaults hold: columns named like the API's fields.
 */
const column = z.string().trim().min(1, 'must name a column');

/** Without a mapping, columns are named like the API's fields. */
const DEFAULT_COLUMNS = {
  email: 'email',
  name: 'name',
  external_id: 'external_id',
  professional_id: 'professional_id',
};

export const configFileSchema = z
  .object({
    contacts: z
      .object({
        /** Which column of the export holds each field of a contact. */
        columns: z
          .object({ email: column, name: column, external_id: column, professional_id: column })
          .partial()
          .strict()
          .prefault({}),
        /** Trim spaces around every value. */
        trim: z.boolean().default(true),
        /** Lower-case emails (the platform matches them case-insensitively; the hash should too). */
        lowercase_email: z.boolean().default(true),
      })
      .strict()
      .prefault({})
      .transform(({ columns, ...rest }) => ({
        ...rest,
        columns: { ...DEFAULT_COLUMNS, ...columns },
        /**
         * The fields whose column the file names: an export is expected to have those, while a
         * default one may be absent (an export without external_id is keyed by email).
         */
        named_columns: Object.keys(columns) as Array<keyof typeof DEFAULT_COLUMNS>,
      })),
    events: z
      .object({
        /**
         * Events derived from a CRM export: a row whose `column` holds `equals` fires `event_type`
         * for that contact, keyed by rule, contact key and value, so each change fires once.
         */
        rules: z
          .array(
            z
              .object({
                name: z
                  .string()
                  .trim()
                  .regex(/^[A-Za-z0-9_.-]+$/, 'must be letters, digits, _ . or -'),
                column: z
                  .string()
                  .trim()
                  .min(1, 'must name a column')
                  .superRefine((column, ctx) => {
                    const holds = RULE_METADATA_KEYS.get(column);
                    if (holds === undefined) return;
                    const keys = [...RULE_METADATA_KEYS.keys()].join(' or ');
                    ctx.addIssue({
                      code: 'custom',
                      message: `"${column}" is a key the rule's events set in their metadata themselves (to ${holds}): the column's value would collide with it, so a rule cannot read a column named ${keys}`,
                    });
                  }),
                equals: z.string(),
                event_type: z
                  .string()
                  .trim()
                  .regex(
                    /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/,
                    'must be a dotted name such as matter.closed',
                  ),
              })
              .strict(),
          )
          .default([])
          .refine(
            (rules) => new Set(rules.map((r) => r.name)).size === rules.length,
            'rule names must be unique',
          ),
      })
      .strict()
      .default({ rules: [] }),
  })
  .strict();

export type ConfigFile = z.infer<typeof configFileSchema>;
export type ContactMapping = ConfigFile['contacts'];
export type EventRule = ConfigFile['events']['rules'][number];

/** Parses the file at `path`, or the defaults when there is none. */
export function loadConfigFile(path: string | undefined): ConfigFile {
  if (path === undefined) return configFileSchema.parse({});
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new ConfigError(`invalid configuration file ${path}: cannot be read (${code})`);
  }
  let value: unknown;
  try {
    value = parse(text) ?? {};
  } catch (error) {
    throw new ConfigError(
      `invalid configuration file ${path}: not YAML or JSON (${(error as Error).message.split('\n')[0]})`,
    );
  }
  const result = configFileSchema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const key = issue.path.length === 0 ? '(top level)' : issue.path.join('.');
    throw new ConfigError(`invalid configuration file ${path}: ${key}: ${issue.message}`);
  }
  return result.data;
}
