import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import type * as schema from "./schema";

/**
 * The query builder over every table, whichever driver is behind it. On its own so that
 * what runs on a database (migrations) can name it without importing the module that opens
 * one, which imports them back.
 */
export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;
