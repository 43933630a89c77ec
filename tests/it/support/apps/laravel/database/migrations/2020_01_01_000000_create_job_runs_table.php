<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Facades\Schema;

class CreateJobRunsTable extends Migration
{
    public function up()
    {
        // What the test jobs did, one row per job (its key).
        Schema::create('job_runs', function (Blueprint $table) {
            $table->string('job_key', 64)->primary();
            $table->unsignedInteger('executions')->default(0);
            $table->unsignedInteger('completions')->default(0);
            $table->unsignedInteger('failed_calls')->default(0);
            $table->unsignedInteger('last_attempt')->nullable();
            $table->text('last_error')->nullable();
        });
        Schema::create('job_events', function (Blueprint $table) {
            $table->bigIncrements('id');
            $table->unsignedBigInteger('job_id')->nullable();
            $table->string('job_name');
            $table->string('event', 20);
            $table->unsignedInteger('attempts');
            $table->timestamp('at', 6)->useCurrent();
        });
    }

    public function down()
    {
        Schema::dropIfExists('job_events');
        Schema::dropIfExists('job_runs');
    }
}
