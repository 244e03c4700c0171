CREATE TABLE "template_build_logs" (
	"build_id" text NOT NULL,
	"seq" integer NOT NULL,
	"at" timestamp (3) with time zone NOT NULL,
	"level" text NOT NULL,
	"message" text NOT NULL,
	"step" text,
	CONSTRAINT "template_build_logs_build_id_seq_pk" PRIMARY KEY("build_id","seq")
);
--> statement-breakpoint
CREATE TABLE "template_builds" (
	"id" text PRIMARY KEY NOT NULL,
	"template_id" text NOT NULL,
	"organization_id" text NOT NULL,
	"status" text NOT NULL,
	"spec" jsonb,
	"tags" jsonb NOT NULL,
	"layers" jsonb,
	"config" jsonb,
	"reason" jsonb,
	"cpu_count" real,
	"memory_mb" integer,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp (3) with time zone
);
--> statement-breakpoint
CREATE TABLE "template_step_cache" (
	"key" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"layer" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "template_tags" (
	"template_id" text NOT NULL,
	"tag" text NOT NULL,
	"build_id" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "template_tags_template_id_tag_pk" PRIMARY KEY("template_id","tag")
);
--> statement-breakpoint
CREATE TABLE "templates" (
	"id" text PRIMARY KEY NOT NULL,
	"organization_id" text NOT NULL,
	"name" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"last_spawned_at" timestamp (3) with time zone,
	"spawn_count" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE INDEX "template_builds_template_idx" ON "template_builds" USING btree ("template_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "templates_org_name_idx" ON "templates" USING btree ("organization_id","name");