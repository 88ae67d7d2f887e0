module kubestrap.bench/go-rsa

go 1.22
