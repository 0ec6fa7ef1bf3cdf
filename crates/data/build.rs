//! Compiles the C shim of the JPEG decoder (`src/codec/tf_jpeg.c`) against the libjpeg headers
//! that mozjpeg-sys built its library with (it passes them on as `DEP_JPEG_INCLUDE`).

fn main() {
    println!("cargo:rerun-if-changed=src/codec/tf_jpeg.c");
    let include = std::env::var_os("DEP_JPEG_INCLUDE")
        .expect("mozjpeg-sys (links = \"jpeg\") gives its include directories");
    let mut build = cc::Build::new();
    build.file("src/codec/tf_jpeg.c").warnings(true);
    for dir in std::env::split_paths(&include) {
        build.include(dir);
    }
    build.compile("towers_tf_jpeg");
}
