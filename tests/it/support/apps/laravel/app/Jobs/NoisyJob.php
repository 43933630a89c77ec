<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use Symfony\Component\Console\Output\ConsoleOutput;

class NoisyJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, RecordsRuns;

    /**
     * Create a new job instance.
     *
     * @return void
     */
    public function __construct(string $key)
    {
        $this->key = $key;
    }

    /**
     * Execute the job: it says things on stdout, every way PHP has.
     *
     * @return void
     */
    public function handle()
    {
        $this->executed();
        echo "noise: echo\n";
        print "noise: print\n";
        fwrite(STDOUT, "noise: STDOUT\n");
        file_put_contents('php://stdout', "noise: php://stdout\n");
        (new ConsoleOutput)->writeln('noise: ConsoleOutput');
        $this->completed();
    }
}
