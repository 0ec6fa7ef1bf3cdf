//! Where one reader's time goes per Inception training image: each stage of
//! `InceptionTrain` run on its own over the shards' first records, timed in this thread's CPU
//! time, which other processes on the machine do not inflate.

pub mod decoders;

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use rand::SeedableRng;

use burn_towers::data::codec::decode_rgb8;
use burn_towers::data::inception::TfExampleFormat;
use burn_towers::data::tf_example::ImageRecord;
use burn_towers::data::tfrecord::record_data;
use burn_towers::data::transforms::{
    InceptionTrain, ResizeMethod, Rng, Source, resize_window, sample_distorted_box,
};
use burn_towers::data::{Planes, RecordFormat, Rgb8};

const STAGES: [&str; 6] = [
    "read record",
    "parse Example",
    "decode JPEG (libjpeg-turbo, as TF)",
    "crop + resize (+ flip)",
    "colour, clip, scale to [-1, 1] (fused)",
    "copy into batch",
];

/// Prints ms per image for each stage over up to 512 records, on this thread.
pub fn print(files: &[PathBuf], t: &InceptionTrain) -> anyhow::Result<()> {
    let (mut rgb, mut scratch, mut batch) = (Rgb8::default(), Vec::new(), Vec::new());
    let mut planes = Planes::zeros(3, t.size, t.size);
    let mut times = [Duration::ZERO; STAGES.len()];
    let mut images = 0;
    let mut rng = Rng::seed_from_u64(0);
    'files: for path in files {
        let mut file = std::fs::File::open(path)?;
        for span in TfExampleFormat::new(1001).index(path)? {
            let mut clock = Clock(cpu_time(), &mut times, 0);
            let mut bytes = vec![0; span.len];
            file.seek(SeekFrom::Start(span.offset))?;
            file.read_exact(&mut bytes)?;
            clock.lap();
            let record =
                ImageRecord::parse(record_data(path, 0, &bytes)?).map_err(anyhow::Error::msg)?;
            clock.lap();
            decode_rgb8(&record.encoded, &mut rgb).map_err(anyhow::Error::msg)?;
            clock.lap();
            let window =
                sample_distorted_box(rgb.height, rgb.width, &record.boxes, &t.crop, &mut rng);
            let method = ResizeMethod::ALL[images % 4];
            let source = Source {
                values: &rgb.pixels[..],
                width: rgb.width,
                channels: 3,
            };
            resize_window(
                &source,
                window,
                method,
                images % 2 == 0,
                &mut planes,
                &mut scratch,
            );
            clock.lap();
            t.distort_color(&mut planes, &mut rng);
            clock.lap();
            if images % 32 == 0 {
                batch.clear();
            }
            batch.extend_from_slice(planes.data());
            clock.lap();
            images += 1;
            if images == 512 {
                break 'files;
            }
        }
    }
    println!("\nInception training input by stage, one thread, {images} images of the shards");
    println!("| stage | ms/image | share |");
    println!("|---|---:|---:|");
    let total: Duration = times.iter().sum();
    for (name, time) in STAGES.iter().zip(times) {
        let share = time.as_secs_f64() / total.as_secs_f64();
        println!(
            "| {name} | {:.3} | {:.0}% |",
            ms(time, images),
            share * 100.0
        );
    }
    println!("| total | {:.3} | 100% |", ms(total, images));
    Ok(())
}

fn ms(time: Duration, images: usize) -> f64 {
    time.as_secs_f64() * 1e3 / images as f64
}

/// Adds the CPU time since the last lap to the next stage's total.
struct Clock<'a>(Duration, &'a mut [Duration; STAGES.len()], usize);

impl Clock<'_> {
    fn lap(&mut self) {
        let now = cpu_time();
        self.1[self.2] += now - self.0;
        (self.0, self.2) = (now, self.2 + 1);
    }
}

/// The CPU time this thread has used.
fn cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The CPU time all of this process's threads have used.
pub fn process_cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The time of one of Linux's CPU-time clocks.
fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; the clock id is a constant of Linux.
    let status = unsafe { libc::clock_gettime(clock, &mut t) };
    assert_eq!(status, 0, "clock_gettime({clock})");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
