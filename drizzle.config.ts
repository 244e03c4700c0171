import { defineConfig } from "drizzle-kit";

// One Postgres dialect for both the embedded PGlite default and a real PostgreSQL server.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/schema.ts",
  out: "./src/db/migrations",
});
